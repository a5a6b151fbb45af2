"""The ``fll`` command line: range scans, lineage at the terminal, record/export, admin.

Entry point `main`, the root group (`fll.cli.root`). The store comes from
``--store``, else ``FLL_STORE``, else the config file (``$FLL_CONFIG`` or
``./conf/fll.yaml``, key ``store``), else ``sqlite:///fll-data/fll.db``.
Exit codes: 0 ok, 1 not found, 2 usage error (bad option, time, file or
lineage), 3 store or internal error. Every error is one line on stderr
saying what failed and in which command; a traceback only with
``--verbose``.

One module per command group, each adding its commands to the root group:
`rows` (scan, get, stats), `questions` (datasets, runs, fields, lineage),
`record`, `export`, `admin`; what they share is in `common`. Commands that
belong to a subsystem with heavy dependencies live in its package and are
loaded only when called (`fll.cli.root`): `serve` (`fll.server.cli`), `run`
(`fll.pipeline.cli`), `spark-conf` (`fll.spark.cli`); `tag` and `diff`
(`fll.cli.govern`) too.
"""
from . import admin, export, questions, record, rows  # noqa: F401  (they add their commands)
from .root import main

__all__ = ["main"]
