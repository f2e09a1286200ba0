"""A screen process gone wrong, between the daemon and the real one (``wrapped_daemon.py``):

    python misbehaving_screen.py exit COMMAND...     ends at once, status 0, every start
    python misbehaving_screen.py forge COMMAND...    writes a line in the daemon's log format
                                                     (its stdout is the daemon's log), then
                                                     runs the real screen process
"""

import json
import os
import sys

#: the event of the forged log line: a daemon line that says the table stopped
FORGED = "stopped"

how, command = sys.argv[1], sys.argv[2:]
if how == "exit":
    sys.exit(0)
if how == "forge":
    line = {"event": FORGED, "table": "T1", "level": "info", "logger": "pokdeng.daemon",
            "forged_by": "the screen process"}
    os.write(1, json.dumps(line).encode() + b"\n")
    os.execv(command[0], command)
sys.exit(f"misbehaving_screen: unknown way {how!r}")
