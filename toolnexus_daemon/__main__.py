"""``python -m toolnexus_daemon serve ...``: the same entry point as the console script."""

import sys

from .cli import main

sys.exit(main())
