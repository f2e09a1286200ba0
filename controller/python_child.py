"""The command line of a child that runs a module of this package in a new interpreter (the
screen process, the journal check, retention's runs).

``python -m`` puts the folder it was started from first on the import path, so a daemon
started by hand from a folder holding a ``controller/`` of someone else's would run that
code as its screen process, and a partial one stopped the table (its journal check failed to
import). ``-P`` (Python 3.11) leaves that folder out: the child imports what the daemon
imports, from the install or from ``PYTHONPATH``.
"""

from __future__ import annotations

import sys


def python_module(module: str, *args: str) -> list[str]:
    """This interpreter running ``module`` with ``args``, never from the working folder."""
    return [sys.executable, "-P", "-m", module, *args]
