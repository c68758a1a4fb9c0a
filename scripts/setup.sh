#!/usr/bin/env bash
# Create or refresh the project's virtual environment (.venv). Idempotent: re-installs only when
# pyproject.toml or this script changed. torch is installed first, pinned to the CPU build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), "MathScout needs Python 3.11"' 
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.mathscout-setup
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
# The browser tests drive Debian's chromium (never a browser downloaded by playwright).
command -v chromium >/dev/null 2>&1 || { apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q chromium; } || echo "warning: could not install chromium (apt-get install chromium as root): the browser tests will be skipped" >&2; }
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv (first run takes a few minutes) …" >&2
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[all]"
  echo "$want" > "$stamp"
fi
