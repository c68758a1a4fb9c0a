#!/usr/bin/env bash
# Create or refresh the project's virtual environment (.venv). Idempotent: re-installs only when
# pyproject.toml or this script changed. torch is installed first, pinned to the CPU build.
set -euo pipefail
cd "$(dirname "$0")/.."
# Python 3.11 or 3.12 ($PYTHON to choose; 3.11 first: its CPU torch wheel is the one this machine keeps locally).
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python3.11 python3.12 python3; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] in ((3, 11), (3, 12))' >/dev/null 2>&1; then PY=$candidate; break; fi
  done
fi
PY=${PY:-python3}
"$PY" -c 'import sys; assert sys.version_info[:2] in ((3, 11), (3, 12)), "MathScout needs Python 3.11 or 3.12"' 
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.mathscout-setup
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
# The browser tests drive Debian's chromium (never a browser downloaded by playwright).
command -v chromium >/dev/null 2>&1 || { apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q chromium; } || echo "warning: could not install chromium (apt-get install chromium as root): the browser tests will be skipped" >&2; }
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv (first run takes a few minutes; pip's output goes to .venv/setup.log) …" >&2
  log=.venv/setup.log
  : > "$log"
  install() { .venv/bin/python -m pip install "$@" >>"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "error: pip install $* failed (whole log: $log)" >&2; exit 1; }; }
  install -q --upgrade pip
  install -q "torch==2.13.0"
  install -q -e ".[all,peers,test]"
  # build the demo index and compile the structure-search kernels now, so the first search starts at once
  .venv/bin/mathscout --quiet search --mode structure '$x^2+1$' >/dev/null || echo "warning: the warm-up search failed" >&2
  echo "$want" > "$stamp"
fi
