"""Between the daemon and its screen process: every byte the daemon writes to the screen
process is appended to RECORD, then passed on. The real screen process runs beneath it with
the listening socket (descriptor 3) it was handed.

    python tests/support/screen_tap.py RECORD COMMAND...
"""

import os
import subprocess
import sys

record_path, command = sys.argv[1], sys.argv[2:]
screens = subprocess.Popen(command, stdin=subprocess.PIPE, pass_fds=(3,))
assert screens.stdin is not None
with open(record_path, "ab") as record:
    while chunk := os.read(0, 65536):
        record.write(chunk)
        record.flush()
        try:
            screens.stdin.write(chunk)
            screens.stdin.flush()
        except BrokenPipeError:
            break
screens.stdin.close()
sys.exit(screens.wait())
