"""``python -m byoc`` is the ``byoc`` command."""

import sys

from .cli import main

sys.exit(main())
