#!/usr/bin/env bash
# The main job: set up, build the embedded demo index if missing, and run the assistant over it.
#   bash scripts/run.sh                          the chat page on http://127.0.0.1:7860 (mathscout serve)
#   bash scripts/run.sh --port 8080 [--index DIR] [--host 0.0.0.0 --public] [--auth USER:PASSWORD]
#                                                the chat page with serve's options (see mathscout serve --help)
#   bash scripts/run.sh 'why is $a^2+b^2=c^2$?' [--no-llm --mode structure …]
#                                                one question answered on the terminal (mathscout ask; the
#                                                question comes first, ask's options after it)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ $# -eq 0 ] || [[ "$1" == -* ]]; then
    exec .venv/bin/mathscout serve "$@"
fi
if [ "$1" = serve ]; then
    shift
    exec .venv/bin/mathscout serve "$@"
fi
if .venv/bin/mathscout ask --help >/dev/null 2>&1; then
    exec .venv/bin/mathscout ask "$@"
fi
exec .venv/bin/mathscout search "$@"  # an installation without the agent: plain search
