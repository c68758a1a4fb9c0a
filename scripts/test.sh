#!/usr/bin/env bash
# Set up and run the whole test suite (needs ../shared beside the checkout for the real-data tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
