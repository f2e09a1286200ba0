"""Start time against the journal's size: start → READY and ``journal verify``, by shoes journaled.

For each size (default 1, 50 and 500 shoes; ``--full`` adds 1,500, 30 days at ~50 shoes a day)
a journal of whole simulated shoes is built once with the table machine and the journal
directly (testkit/journals.py, cached under $TMPDIR/pokdeng-journals), marked delivered, and
the real daemon (``pokdeng-table run``: Bee-Tek shoe simulator on a pty, line panel on a pty,
file transport, a real NOTIFY_SOCKET) is started on a copy and timed from the process start to
the READY=1 datagram; then the whole ``pokdeng-table journal verify FILE`` process is timed.
With ``--legacy`` each size is also measured on a journal written without checkpoints (a
journal from before they existed: the long replay, from record 1).

    python bench/start_bench.py [--shoes 1,50,500] [--full] [--legacy] [--repo CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.harness import notified_table, stop  # noqa: E402
from controller.table.machine import MachineSettings  # noqa: E402
from testkit.journals import cached_journal  # noqa: E402

SETTINGS = MachineSettings(table_id="BENCH", betting_seconds=15.0)
SIZES = (1, 50, 500)
FULL_SIZES = (1, 50, 500, 1500)


def measure_size(shoes: int, checkpoints: bool = True,
                 repo: Path = REPO) -> dict[str, float]:
    """Start → READY and ``journal verify`` on a journal of ``shoes`` shoes, with the code of
    the checkout ``repo`` (another one gives the figures before a change)."""
    work = Path(tempfile.mkdtemp(prefix="pdsb-", dir="/tmp"))
    try:
        state = work / "state"
        state.mkdir(mode=0o750)
        journal = state / "journal.sqlite"
        built = time.monotonic()
        cached_journal(journal, shoes, SETTINGS, checkpoints=checkpoints)
        build_s = time.monotonic() - built
        conn = sqlite3.connect(journal)
        records = conn.execute("SELECT MAX(n) FROM records").fetchone()[0]
        conn.execute("INSERT INTO delivery(transport, last_seq, updated) "
                     "SELECT 'file', MAX(event_seq), 0 FROM records")
        conn.commit()
        conn.close()
        with notified_table(work, repo=repo, journal={"archive": False},
                            table={"id": SETTINGS.table_id,
                                   "betting_seconds": SETTINGS.betting_seconds}) as table:
            began = time.monotonic()
            daemon = table.spawn()
            try:
                ready_s = table.notify.wait_ready(daemon, timeout=600) - began
            finally:
                stop(daemon, 60)
        began = time.monotonic()
        verify = subprocess.run([sys.executable, "-m", "controller", "journal", "verify",
                                 str(journal)], capture_output=True, text=True, cwd=repo,
                                env={**os.environ, "PYTHONPATH": str(repo)})
        verify_s = time.monotonic() - began
        if verify.returncode != 0:
            raise RuntimeError(f"journal verify failed: {verify.stdout}{verify.stderr}")
        return {"shoes": shoes, "records": records, "ready_s": ready_s, "verify_s": verify_s,
                "build_s": build_s, "checkpoints": checkpoints}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(sizes: tuple[int, ...] = SIZES, legacy: bool = False) -> list[dict[str, float]]:
    results = []
    for shoes in sizes:
        results.append(measure_size(shoes, checkpoints=True))
        if legacy:
            results.append(measure_size(shoes, checkpoints=False))
    return results


def describe(result: dict[str, float]) -> str:
    kind = "checkpoints" if result["checkpoints"] else "no checkpoints (old journal)"
    return (f"{result['shoes']:>5} shoes {result['records']:>9,} records  "
            f"start->READY {result['ready_s']:7.2f} s  journal verify {result['verify_s']:7.2f} s"
            f"  [{kind}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", default=None,
                        help="comma-separated journal sizes in shoes (default 1,50,500)")
    parser.add_argument("--full", action="store_true", help="add 1,500 shoes (slow to build)")
    parser.add_argument("--legacy", action="store_true",
                        help="also measure journals written without checkpoints")
    parser.add_argument("--repo", type=Path, default=REPO,
                        help="run the daemon from this checkout (e.g. the code before a change)")
    args = parser.parse_args()
    sizes = FULL_SIZES if args.full else SIZES
    if args.shoes:
        sizes = tuple(int(s) for s in args.shoes.split(","))
    for shoes in sizes:
        for checkpoints in (True, False) if args.legacy else (True,):
            print(describe(measure_size(shoes, checkpoints, args.repo.resolve())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
