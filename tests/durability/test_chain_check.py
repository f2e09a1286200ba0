"""The chain walked in short read transactions, and the verified mark retention starts from:
it saves work, never trust. A mark nobody with the key wrote, or one the journal no longer
matches, is ignored; a record edited behind the mark is still refused when it is archived."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from controller.durability import chain_check, checkpoints
from controller.durability.archives.archive import ArchiveError, archive_closed_shoes
from controller.durability.chain import ChainHash
from controller.durability.journal import (
    ArchiveBase,
    Journal,
    canonical_json,
    connect,
    verify_connection,
)
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import DeviceStatus
from controller.table.machine import MachineSettings, TableMachine
from support.tampering import swap_two_cards, truncate_tail

SETTINGS = MachineSettings(table_id="T7", decks=1)
KEY = b"k" * 32
YEAR_S = 365 * 86400.0


class Table:
    def __init__(self, path: Path, key: bytes | None = None):
        self.path, self.key = path, key
        self.machine = TableMachine(SETTINGS)
        self.clock = 0.0

    def shoe(self, seed: int) -> int:
        """Journal one closed shoe; returns the records it added."""
        with Journal(self.path, self.key) as journal:
            before = journal.record_count()
            script = shoe_script(seed, decks=1, start_at=self.clock + 5)
            self.clock = max(inp.at for inp in script) + 1
            for inp in [*script, DeviceStatus(at=self.clock, name="panel", connected=True)]:
                journal.append(inp, self.machine.handle(inp))
            return journal.record_count() - before


def walk(path: Path, key: bytes | None = None, start=None, step: int = 7):
    conn = connect(path)
    try:
        return chain_check.verify_in_steps(conn, ChainHash(key), start, step)
    finally:
        conn.close()


def mark_of(path: Path, key: bytes | None = None):
    conn = connect(path)
    try:
        return chain_check.load_mark(conn, ChainHash(key))
    finally:
        conn.close()


@pytest.mark.parametrize("tamper", [None, swap_two_cards, truncate_tail])
def test_the_walk_in_steps_finds_what_the_one_snapshot_walk_finds(tmp_path, tamper) -> None:
    path = tmp_path / "j.sqlite"
    table = Table(path)
    for seed in (1, 2, 3):
        table.shoe(seed)
    if tamper is not None:
        tamper(path)
    conn = sqlite3.connect(path, isolation_level=None)
    whole = verify_connection(conn)
    conn.close()
    stepped, mark = walk(path)
    assert (stepped.ok, stepped.bad_record, stepped.reason, stepped.records) == \
        (whole.ok, whole.bad_record, whole.reason, whole.records)
    assert (mark is not None) == whole.ok
    if tamper is None:
        assert mark is not None and mark.records == whole.records


def test_retention_checks_only_the_records_after_its_mark(tmp_path) -> None:
    path = tmp_path / "j.sqlite"
    table = Table(path, KEY)
    for seed in (1, 2):
        table.shoe(seed)
    kept = archive_closed_shoes(path, YEAR_S, settings=SETTINGS, key=KEY, trust_mark=True)
    assert not kept.archived
    mark, why = mark_of(path, KEY)
    assert mark is not None, why
    assert walk(path, KEY, mark)[0].records == 0       # nothing new: nothing walked
    added = table.shoe(3)
    result, new_mark = walk(path, KEY, mark)
    assert result.ok and result.records == added       # only the new shoe
    assert new_mark is not None and new_mark.records == mark.records + added


def test_a_mark_without_the_key_or_off_the_chain_is_ignored(tmp_path) -> None:
    path = tmp_path / "j.sqlite"
    table = Table(path, KEY)
    table.shoe(1)
    archive_closed_shoes(path, YEAR_S, settings=SETTINGS, key=KEY, trust_mark=True)
    assert mark_of(path, KEY)[0] is not None
    conn = sqlite3.connect(path, isolation_level=None)
    good = conn.execute("SELECT mark, digest FROM verified").fetchone()

    def store(text: str, digest: str) -> None:
        conn.execute("UPDATE verified SET mark=?, digest=?", (text, digest))

    # moved back with a digest computed without the key (plain SHA-256)
    moved = canonical_json({"kind": "verified-mark", "records": 3, "hash": "0" * 64, "seq": 1})
    store(moved, hashlib.sha256(moved.encode()).hexdigest())
    assert mark_of(path, KEY) == (None, "the verified mark does not match its digest")
    # a shoe-end checkpoint of the same record (signed with the key) copied in as a mark
    mark = chain_check.Mark(**{k: v for k, v in json.loads(good[0]).items()
                                               if k != "kind"})
    checkpoint = ArchiveBase(mark.records, mark.hash, mark.seq, {"seq": mark.seq}).to_json()
    store(checkpoint, checkpoints.digest(checkpoint, ChainHash(KEY)))
    assert mark_of(path, KEY) == (None, "the verified mark is not valid")
    assert mark.records > 0
    # the record the mark names no longer matches it
    store(*good)
    n = mark_of(path, KEY)[0].records
    conn.execute("UPDATE records SET written = written + 1 WHERE n=?", (n,))
    assert mark_of(path, KEY) == (None, f"record {n} no longer matches the verified mark")
    conn.close()


def test_a_record_edited_behind_the_mark_is_refused_when_it_is_archived(tmp_path) -> None:
    path = tmp_path / "j.sqlite"
    table = Table(path, KEY)
    for seed in (1, 2):
        table.shoe(seed)
    archive_closed_shoes(path, YEAR_S, settings=SETTINGS, key=KEY, trust_mark=True)
    conn = sqlite3.connect(path, isolation_level=None)
    edited = conn.execute("SELECT MIN(n) FROM records WHERE kind='input' AND n > 20"
                          ).fetchone()[0]
    conn.execute("UPDATE records SET written = written + 0.5 WHERE n=?", (edited,))
    conn.close()
    # the incremental check trusts what it checked before ...
    assert walk(path, KEY, mark_of(path, KEY)[0])[0].ok
    # ... but the record is checked again as it is archived, and nothing is removed
    with pytest.raises(ArchiveError, match=f"record {edited}"):
        archive_closed_shoes(path, 0.0, settings=SETTINGS, key=KEY, trust_mark=True)
    assert not walk(path, KEY)[0].ok      # the full check after READY names it too
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT MIN(n) FROM records").fetchone()[0] == 1
    conn.close()


def test_a_paced_walk_rests_between_steps_outside_its_snapshots(tmp_path, monkeypatch) -> None:
    """duty 0.25: after each step a rest three times as long as the step, never inside a read
    transaction (a resting walk holds back no WAL checkpoint); the verdict is the same."""
    path = tmp_path / "j.sqlite"
    Table(path).shoe(1)
    conn = connect(path)
    rests: list[tuple[float, bool]] = []
    real_monotonic = chain_check.time.monotonic
    ticks = iter(range(10**6))
    # each step "takes" 1 s on a clock that moves only when read
    monkeypatch.setattr(chain_check.time, "monotonic", lambda: float(next(ticks)))
    monkeypatch.setattr(chain_check.time, "sleep",
                        lambda s: rests.append((s, conn.in_transaction)))
    try:
        result, mark = chain_check.verify_in_steps(conn, ChainHash(None), None, 50, duty=0.25)
    finally:
        monkeypatch.setattr(chain_check.time, "monotonic", real_monotonic)
        conn.close()
    assert result.ok and mark is not None
    steps = -(-result.records // 50)  # every step but the last rests
    assert len(rests) >= steps - 1 and all(s == pytest.approx(3.0) for s, _ in rests)
    assert not any(in_transaction for _, in_transaction in rests)
    assert walk(path, step=50)[0] == result  # the same verdict as an unpaced walk
    with pytest.raises(ValueError, match="duty"):
        chain_check.verify_in_steps(connect(path), ChainHash(None), duty=0)
