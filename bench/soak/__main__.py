"""``python -m bench.soak`` (or ``python bench/soak``) from the clone: the soak (docs/soak.md)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.soak.cli import main  # noqa: E402

sys.exit(main())
