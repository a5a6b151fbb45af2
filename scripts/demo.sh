#!/usr/bin/env bash
# All set-up, then the main job: the demo pipeline on local Spark, recording
# its lineage into the embedded store (./fll-data/fll.db) and showing it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
.venv/bin/python scripts/demo.py "$@"
