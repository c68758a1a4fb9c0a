#!/usr/bin/env bash
# Type-check the package as it installs (issue 33): mypy -p mathscout over mathscout/ with agent/, retrievers/, tools/, …
# in place, as pyproject's [tool.setuptools.package-dir] maps them. mypy cannot follow setuptools' editable import hook
# and the repository holds no links, so the package is assembled as links in a temporary folder outside the checkout;
# mypy's configuration is pyproject's [tool.mypy]. Errors name repository paths (agent/plan.py:12, not
# mathscout/agent/plan.py) so an editor can jump to them. Extra arguments go to mypy. Runs from any directory.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$REPO/.venv/bin/python}
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/mathscout-typecheck.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
# the links, and one sed expression per mapped folder: mathscout/agent/ -> agent/
SED=$("$PY" - "$REPO" "$STAGE" <<'PYEOF'
import sys
import tomllib
from pathlib import Path

repo, stage = Path(sys.argv[1]), Path(sys.argv[2])
mapping = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
(stage / "mathscout").mkdir()
for entry in (repo / "mathscout").iterdir():
    if entry.name not in ("__pycache__",):
        (stage / "mathscout" / entry.name).symlink_to(entry)
for package, folder in sorted(mapping.items()):
    target = stage / package.replace(".", "/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(repo / folder)
    print(f"s#^{package.replace('.', '/')}/#{folder}/#")
PYEOF
)
# the cache survives the temporary folder: mypy revalidates a moved file by its hash
cd "$STAGE"
set +e
"$PY" -m mypy --config-file "$REPO/pyproject.toml" --cache-dir "$REPO/.mypy_cache" -p mathscout "$@" 2>&1 | sed -e "$SED"
status=${PIPESTATUS[0]}
exit "$status"
