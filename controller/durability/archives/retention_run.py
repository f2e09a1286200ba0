"""One retention run in a child process (``retention.py`` starts it at idle priority).

The parent writes a pickle of the run's arguments on stdin (the table's settings and a keyed
chain's key among them: never on the command line), the child archives and prints one JSON
object: the result's fields, or ``{"error": …}``. Pickle is safe here: the bytes come from the
daemon that started this process, through a pipe only the two of them hold.
"""

from __future__ import annotations

import json
import pickle
import sys
import time
from typing import Any

#: a pause after each cut: the owner loop's appends and the WAL checkpoints get the lock
BETWEEN_CUTS_S = 0.05


def run(job: dict[str, Any]) -> dict[str, Any]:
    from controller.durability.archives.archive import archive_closed_shoes
    from controller.durability.journal import JournalError

    try:
        result = archive_closed_shoes(
            job["journal"], job["older_than_s"], settings=job["settings"],
            archive_dir=job["archive_dir"], key=job["key"], trust_mark=True,
            between_cuts=lambda: time.sleep(BETWEEN_CUTS_S))
    except JournalError as exc:
        return {"error": str(exc)}
    return {"archived": result.archived, "reason": result.reason,
            "file": None if result.file is None else str(result.file),
            "first_record": result.first_record, "last_record": result.last_record,
            "first_seq": result.first_seq, "last_seq": result.last_seq,
            "shoes": list(result.shoes), "files": result.files}


def main() -> int:
    job = pickle.loads(sys.stdin.buffer.read())
    print(json.dumps(run(job)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
