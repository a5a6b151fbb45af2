#!/usr/bin/env bash
# One-time set-up, safe to re-run: a virtualenv in .venv with fll and its
# test tools installed (editable). Needs Python >= 3.10 and Java 17 for Spark.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' || {
  echo "fll needs Python 3.10 or newer; $PY is $("$PY" --version 2>&1)" >&2; exit 2; }
command -v java >/dev/null || {
  echo "Spark needs Java 17 on the PATH (apt-get install openjdk-17-jre-headless)" >&2; exit 2; }

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet --progress-bar off -e ".[dev]"
# the JVM listener (fll spark-conf): rebuilt only when its source, Spark or the JDK changed
if command -v javac >/dev/null; then
  .venv/bin/python -m fll.spark.listener build
else
  echo "no javac: the Spark listener is not built (apt-get install openjdk-17-jdk-headless)" >&2
fi
echo "set-up done: .venv has fll $(.venv/bin/python -c 'import fll; print(fll.__version__)')"
