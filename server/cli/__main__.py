"""``python -m server.cli``: the ``esfis`` command."""

import sys

from server.cli import main

sys.exit(main())
