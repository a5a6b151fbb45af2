"""The demo: run CDAP's HR File + Person File -> Employee Data pipeline and show its lineage.

Runs conf/pipelines/employee.json, then conf/pipelines/customers.json (a
directive recipe and a Spark SQL stage), on local Spark into the embedded store
(``$FLL_STORE`` or ``sqlite:///fll-data/fll.db``; ``--store`` to change it),
then reads the lineage of every Employee Data field back from the store and
prints the source fields and the operations that built it. It must never
write anywhere but the store and fll-data/.

    .venv/bin/python scripts/demo.py [--store URL] [--master local[2]]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from fll.errors import FllError  # noqa: E402
from fll.model import EndPoint, EndPointField  # noqa: E402
from fll.pipeline.runner import describe_operation, run_pipeline, start_spark  # noqa: E402
from fll.render import render_dot, walk_lineage  # noqa: E402
from fll.cli.common import STORE_HELP, configured_store_url  # noqa: E402
from fll.store import open_store  # noqa: E402


def reference(store, ep: EndPoint) -> str:
    """A file dataset (named by its location) as the spec names it: its referenceName."""
    names = store.aliases(ep.namespace, ep.name)
    return names[0][1] if names else ep.name


def show_employee_lineage(url: str, result) -> None:
    """Every Employee Data field's sources and operations, as stored, and a DOT
    picture of ID's lineage."""
    print()
    print("Field lineage of Employee Data, as stored:")
    start, end = result.start_time_ms, result.start_time_ms + 1
    with open_store(url) as store:
        # the sink's referenceName is an alias of its location, the name it is stored under
        target = EndPoint(*store.resolve_dataset("default", "Employee Data"))
        print(f"  (dataset {target.namespace}:{target.name}, alias default:Employee Data)")
        for name in store.fields(target, start, end):
            efield = EndPointField(target, name)
            sources = sorted(store.incoming(efield, start, end),
                             key=lambda f: (reference(store, f.endpoint), f.field))
            print(f"\n  Employee Data.{name} <- "
                  + ", ".join(f"{reference(store, s.endpoint)}.{s.field}" for s in sources))
            for group in store.operations(efield, start, end):
                for op in group.operations:
                    print(f"      {describe_operation(op)}")
        # a picture of ID's lineage, for those who would rather look than read
        graph = walk_lineage(store, EndPointField(target, "ID"), "both", 5, start, end)
    out_dir = os.path.join(ROOT, "fll-data")
    os.makedirs(out_dir, exist_ok=True)
    dot_path = os.path.join(out_dir, "employee-data-ID.dot")
    with open(dot_path, "w", encoding="utf-8") as f:
        f.write(render_dot(graph))
    print(f"\nThe graph of Employee Data.ID as Graphviz DOT: {dot_path}")
    if shutil.which("dot"):
        svg_path = dot_path[:-4] + ".svg"
        subprocess.run(["dot", "-Tsvg", dot_path, "-o", svg_path], check=False)
        print(f"  rendered as {svg_path}")


def show_sql_tags(url: str, result) -> None:
    """The OpenLineage transformation types the Spark plan gave the SQL stage."""
    start, end = result.start_time_ms, result.start_time_ms + 1
    print("\nHow the SQL stage built Customers per Country (from its Spark plan):")
    with open_store(url) as store:
        target = EndPoint(*store.resolve_dataset("default", "Customers per Country"))
        for name in store.fields(target, start, end):
            for group in store.operations(EndPointField(target, name), start, end):
                for op in group.operations:
                    if not op.name.startswith("Count per Country."):
                        continue  # the recipe's steps are tagged too; show the SQL stage
                    for inp, tags in getattr(op, "transformations", {}).items():
                        if inp.origin.startswith("Count per Country."):
                            continue  # the stage's own earlier step, not one of its inputs
                        kinds = ", ".join(f"{t.type}/{t.subtype}" + (" masked" if t.masking
                                                                      else "") for t in tags)
                        print(f"  {name:<13} <- {inp.name:<12} {kinds}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help=STORE_HELP)
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--spec", default=os.path.join(ROOT, "conf", "pipelines",
                                                       "employee.json"))
    args = parser.parse_args(argv)
    url = configured_store_url(args.store)
    # one Spark session for both pipelines: Spark takes seconds to start
    spark, _ = start_spark("demo", args.master)
    try:
        try:
            result = run_pipeline(args.spec, store_url=url, spark=spark)
        except FllError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        show_employee_lineage(url, result)
        print("\nA second pipeline: a directive recipe and Spark SQL "
              "(conf/pipelines/customers.json)\n")
        try:
            second = run_pipeline(os.path.join(ROOT, "conf", "pipelines", "customers.json"),
                                  store_url=url, spark=spark)
        except FllError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        show_sql_tags(url, second)
    finally:
        spark.stop()
    print("\nExplore it in the browser:  .venv/bin/fll --store " + url + " serve   "
          "(then open http://127.0.0.1:8080/)")
    print('Or at the terminal:         .venv/bin/fll --store ' + url
          + ' lineage "default:Employee Data:ID"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
