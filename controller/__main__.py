"""`python -m controller` is the same as the `pokdeng-table` command."""

import sys

from controller.cli import main

sys.exit(main())
