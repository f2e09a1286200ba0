"""Loaded by every Python process started with this folder on PYTHONPATH and
``POKDENG_GC_WATCH=DIR`` set (bench/gc_pauses.py does both): a line per garbage collection to
DIR/<pid>.gc, ``start_s ms generation collected`` (start on the monotonic clock, shared by
every process), after a first line with the process's command line. Nothing otherwise."""

import gc
import os
import sys
import time

_directory = os.environ.get("POKDENG_GC_WATCH")
if _directory:
    _out = open(os.path.join(_directory, f"{os.getpid()}.gc"), "a", buffering=1)
    _out.write("# " + " ".join(sys.orig_argv) + "\n")
    _started = [0.0]

    def _note(phase, info):
        if phase == "start":
            _started[0] = time.monotonic()
        else:
            took_ms = (time.monotonic() - _started[0]) * 1000
            _out.write(f"{_started[0]:.6f} {took_ms:.3f} {info['generation']} "
                       f"{info['collected']}\n")

    gc.callbacks.append(_note)
