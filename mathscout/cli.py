"""`python -m mathscout.cli` and the `mathscout` script: the command line, which lives in the entry-point layer
(`mathscout.ui.cli`)."""

import sys

from mathscout.ui.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
