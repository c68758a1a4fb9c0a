"""Where the tests find things: the checkout, the shared data beside it, the screenshots folder."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: tests/support/paths.py → ../..
PACKAGE = REPO / "mathscout"  # the core package; the folders pyproject maps into it sit beside it (agent/, …)
SHARED_DATA = Path(os.environ.get("MATHSCOUT_SHARED_DATA", REPO.parent / "shared" / "data"))
ARTIFACTS = REPO / "tests" / "artifacts"  # the browser tests' screenshots (git-ignored)
