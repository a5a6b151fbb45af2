"""OpenLineage in and out: RunEvents with `columnLineage` facets <-> field operations.

By concept:

- `fll.openlineage.events`: reading an event (the checks every event
  passes, its kind, run id, time and job) and what it says about datasets
  beside lineage (schemas and symlinks, kept by `record_facts`);
- `fll.openlineage.facets`: column lineage facets <-> operation sets;
- `fll.openlineage.ingest`: a run's operation set from its events (one
  event's, and the union of a run's events);
- `fll.openlineage.export`: a recorded run, and what the store knows of a
  dataset, as events.

The run cycle: a run's lineage is the union of the column lineage of all
its events (`fll.openlineage.ingest`). FAIL and ABORT are terminal like
COMPLETE and their lineage is kept, but apart: a run whose events include a
FAIL or ABORT is a failed run (`fll.store.runs`: the state rule), its lineage
moved out of the default index into the failed-run rows, so field questions
leave it out unless asked (``includeFailed``). The run's start time is the
`eventTime` of the first event the store saw for it (persisted
first-writer-wins, so two servers agree). The server merges the events of one
run one at a time; two servers merging different additions to one run at the
same instant can keep only one of them (the store replaces a run's set
atomically but has no compare-and-set on it), which the run's next cumulative
event restores.

Beside lineage, ingest keeps what events say about datasets
(`dataset_facts`): the SchemaDatasetFacet (field names and types, per run,
time-ranged) and the SymlinksDatasetFacet (other names of the dataset). A
DatasetEvent or JobEvent (spec 2-0-2) records only those.

Export (`facet_from_info`, `export_events`) goes the other way: per output
field the source fields it derives from, with the transformation tags composed
along every path (semantics §5: INDIRECT beats DIRECT; among DIRECT,
AGGREGATION beats TRANSFORMATION beats IDENTITY).

Nothing here writes to a store but `record_facts`, and nothing half-parses
an event: any malformed value is a `BadRequest` naming its JSON path before
anything else happens.
"""
from __future__ import annotations

from .events import (COLUMN_LINEAGE_SCHEMA_URL, DATASET_EVENT_SCHEMA_URL, PRODUCER,
                     PROPERTIES_FACET, PROPERTIES_SCHEMA_URL, RUN_EVENT_SCHEMA_URL, RUN_FACET,
                     RUN_FACET_SCHEMA_URL, SCHEMA_OWNER_FACET, SCHEMA_OWNER_SCHEMA_URL,
                     SCHEMA_SCHEMA_URL, SYMLINKS_SCHEMA_URL, DatasetFacts, _iso,
                     check_shape, check_static_event, dataset_facts, event_kind,
                     event_run_id, event_time_ms, export_run_id, job_of, record_facts,
                     record_schemas, schema_owner, static_column_lineage, static_owner)
from .export import export_events, exported_end_ms, info_to_event
from .facets import (_NORMAL, dataset_input_transformations, facet_from_info,
                     input_transformations, normal_form)
from .ingest import (_BUILT, _ORIGINAL, adopt, adopt_union, build_json, built_here,
                     lineage_json, memo_budget, normal_checksum, run_event,
                     run_event_to_lineage, union, union_built, union_of)

__all__ = ["dataset_input_transformations", "run_event_to_lineage", "union", "normal_form",
           "memo_budget", "run_event", "union_of", "lineage_json", "built_here", "build_json", "union_built",
           "adopt", "adopt_union",
           "normal_checksum", "event_kind", "dataset_facts", "DatasetFacts",
           "check_static_event", "static_column_lineage", "export_run_id", "schema_owner",
           "static_owner", "record_facts", "record_schemas", "SCHEMA_OWNER_FACET", "RUN_FACET",
           "check_shape",
           "facet_from_info", "export_events", "info_to_event", "exported_end_ms",
           "input_transformations", "event_run_id", "event_time_ms", "job_of", "PRODUCER",
           "RUN_EVENT_SCHEMA_URL", "COLUMN_LINEAGE_SCHEMA_URL", "PROPERTIES_FACET",
           "PROPERTIES_SCHEMA_URL", "RUN_FACET_SCHEMA_URL", "SCHEMA_OWNER_SCHEMA_URL",
           "DATASET_EVENT_SCHEMA_URL", "SCHEMA_SCHEMA_URL", "SYMLINKS_SCHEMA_URL",
           "_iso", "_BUILT", "_ORIGINAL", "_NORMAL"]
