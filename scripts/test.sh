#!/usr/bin/env bash
# All set-up, then lint and the whole test suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
for extra in scripts/install-bigtable-emulator.sh scripts/install-browser.sh scripts/install-dbt.sh; do
  if [ -f "$extra" ]; then bash "$extra"; fi
done
.venv/bin/ruff check fll tests scripts
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
