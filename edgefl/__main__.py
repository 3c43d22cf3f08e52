"""``python -m edgefl``: the command line (edgefl.cli)."""

import sys

from edgefl.cli import main

sys.exit(main())
