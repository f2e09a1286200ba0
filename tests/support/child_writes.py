"""A child for tests/durability/test_idle_child.py: writes to the journal named on its command
line and reports its CPU priority before, inside and after the write transaction, as JSON.
``--lower``: it lowers itself first, as a ``journal`` command does."""

import json
import os
import sys

from controller.durability.idle_child import lower_own_priority
from controller.durability.journal import connect
from controller.durability.write_lock import write_transaction


def priority() -> list[int]:
    return [os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)]


sys.stdin.buffer.read()
if "--lower" in sys.argv[2:]:
    lower_own_priority()
conn = connect(sys.argv[1])
before = priority()
with write_transaction(conn):
    conn.execute("INSERT INTO meta(key, value) VALUES ('written', 'by the child')")
    inside = priority()
after = priority()
conn.close()
print(json.dumps({"before": before, "inside": inside, "after": after}))
