#!/usr/bin/env bash
# A separate virtualenv (.venv-dbt) with dbt on the duckdb adapter and dbt-ol,
# for the end-to-end test of the OpenLineage ingest with a real producer.
# dbt-core 1.11+ fetches a parser binary from GitHub at install time, hence <1.11.
# dbt pins many libraries of its own, so it never goes into .venv.
# Idempotent: an existing venv with dbt-ol on its PATH is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-dbt
PINS=("dbt-core>=1.9,<1.11" "dbt-duckdb>=1.9,<1.11" "openlineage-dbt>=1.30,<2")
if [ -x "$VENV/bin/dbt-ol" ] && "$VENV/bin/python" -c "import dbt.adapters.duckdb" 2>/dev/null; then
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "${PINS[@]}"
"$VENV/bin/dbt-ol" --version >/dev/null 2>&1 || "$VENV/bin/dbt" --version >/dev/null
