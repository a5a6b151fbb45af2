"""The built-in plugins; importing this package registers them by name.

Sources: csv-source, json-source, parquet-source, text-source. Sinks:
csv-sink, json-sink, parquet-sink. Transforms: projection, csv-parser, sql,
python, wrangler. Joiner: joiner. Nothing here may run at import time but
registration (no Spark, no directive engine).
"""
from . import files, joiner, sql, transforms, wrangler  # noqa: F401
