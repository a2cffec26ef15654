"""``python -m chaos`` (with scripts/ on PYTHONPATH): see ``make chaos``."""

import sys

from .run import main

sys.exit(main())
