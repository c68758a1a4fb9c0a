#!/usr/bin/env bash
# The main job: set up, build the embedded demo index if missing, and run the assistant.
# With arguments: a one-shot search (e.g. bash scripts/run.sh 'sum of $\frac{1}{n^2}$').
# Without: an interactive search prompt.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/mathscout search "$@"
