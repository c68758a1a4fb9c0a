#!/usr/bin/env bash
# Set up, check and run the whole test suite (needs ../shared beside the checkout for the real-data tests).
# The checks (issue 33): ruff's lint rules and format, and mypy over the package as it installs (pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
bash scripts/typecheck.sh
exec .venv/bin/python -m pytest --durations=40 "$@"  # the 40 slowest listed: what to trim when the suite grows
