"""A child for tests/durability/test_idle_child.py: reports how it was started, as JSON."""

import json
import os
import sys
import time

data = sys.stdin.buffer.read()
if sys.argv[1:] == ["sleep"]:
    time.sleep(60)
with open("/proc/self/cmdline", "rb") as cmdline, open("/proc/self/environ", "rb") as env:
    seen = cmdline.read() + env.read()
print(json.dumps({"policy": os.sched_getscheduler(0), "nice": os.nice(0),
                  "stdin": data.decode(), "secret_outside_stdin": b"s3cret" in seen}))
