"""The table's core path as a process the kill-and-restart test can SIGKILL anywhere.

journal → recover (replay) → table machine → journal.append → outbox → HTTP webhook, fed by a
table script. On start it recovers from the journal and continues the script after the last
journaled input, exactly as the daemon resumes after a crash. Prints one line per appended
input ("in <index>") and "done" once the backend has every event.

    python tests/support/core_path_proc.py JOURNAL SCRIPT URL SECRET_FILE TABLE
"""

from __future__ import annotations

import sys
from pathlib import Path

from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.durability.recovery import recover
from controller.table.inputs import read_script
from controller.table.machine import MachineSettings
from controller.transports import create


def main(journal_path: str, script_path: str, url: str, secret_file: str, table: str) -> int:
    inputs = list(read_script(Path(script_path).read_text().splitlines(), script_path))
    journal = Journal(journal_path)
    machine = recover(journal, MachineSettings(table_id=table))
    done = sum(1 for _ in journal.inputs())
    transport = create("http", {"url": url, "secret_file": secret_file, "allow_insecure": True,
                                "batch_max": 25, "backoff_initial_s": 0.01, "backoff_max_s": 0.05,
                                "timeout_s": 2.0}, table=table)
    outbox = Outbox(journal.path, [transport])
    outbox.start()
    print(f"resumed {done}", flush=True)
    for index in range(done, len(inputs)):
        events = machine.handle(inputs[index])
        journal.append(inputs[index], events)
        outbox.notify()
        print(f"in {index}", flush=True)
    if not outbox.wait_delivered(journal.last_event_seq(), 30):
        print(f"not delivered: {outbox.status()}", flush=True)
        return 1
    outbox.stop()
    journal.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
