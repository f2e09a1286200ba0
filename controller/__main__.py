"""`python -m controller` is the same as the `pokdeng-table` command."""

import sys

from controller.commands.cli import main

sys.exit(main())
