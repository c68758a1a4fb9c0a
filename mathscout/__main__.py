"""`python -m mathscout …`: the command line (`mathscout.ui.cli`)."""

import sys

from mathscout.ui.cli import main

sys.exit(main())
