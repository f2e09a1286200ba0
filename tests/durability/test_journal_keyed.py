"""The keyed chain on real SQLite files: what the journal records, which keys open it, and
archives of a keyed journal verifying with its key only."""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3

import pytest

from controller.durability.archives.archive import archive_closed_shoes, verify_with_archives
from controller.durability.chain import record_material
from controller.durability.head_file import HeadFileError, head_path, mark_of, read_head, write_head
from controller.durability.journal import Journal, JournalKeyError, verify_file
from controller.durability.recovery import recover
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine
from support.journal_helpers import fill

KEY = bytes.fromhex("5a" * 32)
OTHER = bytes.fromhex("a5" * 32)
SETTINGS = MachineSettings(table_id="T7", decks=1)


def rows(path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT n, kind, event_seq, written, body, prev_hash, hash "
                            "FROM records ORDER BY n").fetchall()
    finally:
        conn.close()


def test_a_keyed_journal_hashes_each_record_with_hmac_sha256_of_the_key(tmp_path) -> None:
    path = tmp_path / "journal.sqlite"
    with Journal(path, KEY) as journal:
        fill(journal, 10)
        assert journal.chain.describe() == "keyed (HMAC-SHA256)"
    for n, kind, seq, written, body, prev, digest in rows(path):
        material = record_material(n, kind, seq, written, prev, body)
        assert digest == hmac.new(KEY, material, hashlib.sha256).hexdigest()
        assert digest != hashlib.sha256(material).hexdigest()
    assert verify_file(path, KEY).ok


def test_a_plain_journal_keeps_the_plain_chain(tmp_path) -> None:
    path = tmp_path / "journal.sqlite"
    with Journal(path) as journal:
        fill(journal, 5)
        assert journal.chain.describe().startswith("plain — anyone who can write the file")
    n, kind, seq, written, body, prev, digest = rows(path)[0]
    assert digest == hashlib.sha256(record_material(n, kind, seq, written, prev, body)) \
        .hexdigest()
    assert verify_file(path).ok


def test_the_journal_refuses_a_missing_or_wrong_key_and_a_key_for_a_plain_chain(tmp_path):
    keyed, plain = tmp_path / "keyed.sqlite", tmp_path / "plain.sqlite"
    with Journal(keyed, KEY) as journal:
        fill(journal, 3)
    with Journal(plain) as journal:
        fill(journal, 3)
    with pytest.raises(JournalKeyError, match=f"{keyed}: this journal's chain is keyed"):
        Journal(keyed)
    with pytest.raises(JournalKeyError, match=f"{keyed}: the key given is not this journal's"):
        Journal(keyed, OTHER)
    with pytest.raises(JournalKeyError, match=f"{plain}: this journal has a plain chain"):
        Journal(plain, KEY)
    with pytest.raises(JournalKeyError, match="chain is keyed"):
        verify_file(keyed)
    # an empty keyed journal stays keyed: opening it without the key is refused too
    empty = tmp_path / "empty.sqlite"
    Journal(empty, KEY).close()
    with pytest.raises(JournalKeyError):
        Journal(empty)


def test_archives_of_a_keyed_journal_verify_with_its_key(tmp_path) -> None:
    path = tmp_path / "journal.sqlite"
    machine = TableMachine(SETTINGS)
    with Journal(path, KEY) as journal:
        clock = 0.0
        for seed in (1, 2):
            for inp in shoe_script(seed, decks=1, start_at=clock + 5):
                journal.append(inp, machine.handle(inp))
                clock = max(clock, inp.at)
    result = archive_closed_shoes(path, 0.0, settings=SETTINGS, key=KEY)
    assert result.archived, result.describe()
    check = verify_with_archives(path, key=KEY)
    assert check.ok and check.archives == 1, check.describe()
    with pytest.raises(JournalKeyError):
        verify_with_archives(path)
    with Journal(path, KEY) as journal:  # recovery from the archive cut, keyed
        assert recover(journal, SETTINGS).status() == machine.status()
    # an archived record re-chained without the key no longer holds
    archive = result.file
    assert archive is not None
    import gzip
    lines = gzip.decompress(archive.read_bytes()).decode().splitlines()
    record = json.loads(lines[3])
    record["hash"] = hashlib.sha256(record_material(
        record["n"], record["kind"], record["event_seq"], record["written"],
        record["prev_hash"], record["body"])).hexdigest()
    lines[3] = json.dumps(record)
    archive.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    check = verify_with_archives(path, key=KEY)
    assert not check.ok and check.bad_record == record["n"]


def test_the_head_file_is_signed_with_the_key(tmp_path) -> None:
    path = tmp_path / "journal.sqlite"
    with Journal(path, KEY) as journal:
        fill(journal, 4)
        write_head(head_path(path), mark_of(journal, 1764500000.0), journal.chain)
        mark = read_head(head_path(path), journal.chain)
        assert mark is not None and mark.record == journal.record_count()
        assert mark.time == "2025-11-30T10:53:20.000Z"
    data = json.loads(head_path(path).read_text())
    assert len(data["mac"]) == 64 and data["chain"] == "hmac-sha256"
    with Journal(path, KEY) as journal:
        data["seq"] += 1
        head_path(path).write_text(json.dumps(data))
        with pytest.raises(HeadFileError, match="MAC does not match"):
            read_head(head_path(path), journal.chain)
        head_path(path).write_text("{not json")
        with pytest.raises(HeadFileError, match="not a valid head file"):
            read_head(head_path(path), journal.chain)


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "keyed"])
def test_anchors_name_each_event_record_and_a_plain_chain_holds_them_back_while_betting_is_open(
        tmp_path, key) -> None:
    from controller.durability.delivery.outbox import Outbox
    from controller.transports.file import FileSink, FileSinkSettings

    path, sink = tmp_path / "journal.sqlite", tmp_path / "events.jsonl"
    machine = TableMachine(SETTINGS)
    with Journal(path, key) as journal:
        for inp in shoe_script(1, decks=1, start_at=5):
            journal.append(inp, machine.handle(inp))
        # small batches: many start inside a betting window, where the window is looked up
        with Outbox(path, [FileSink(FileSinkSettings(str(sink), batch_max=7),
                                    table="T7")]) as box:
            assert box.wait_delivered(journal.last_event_seq(), 10)
    records = {seq: (n, digest) for n, _k, seq, _w, _b, _p, digest in rows(path) if seq}
    sent = [json.loads(line) for line in sink.read_text().splitlines()]
    betting_open, held_back = False, 0
    for event in sent:
        if event["type"] == "round_opened":
            betting_open = True
        elif event["type"] in ("betting_closed", "round_cancelled"):
            betting_open = False
        elif betting_open and key is None:
            assert "anchor" not in event, event
            held_back += 1
            continue
        n, digest = records[event["seq"]]
        assert event["anchor"] == {"record": n, "hash": digest}
    assert held_back > 10 if key is None else held_back == 0


def test_a_keyed_journal_refuses_a_shoe_end_checkpoint_stored_without_the_key(tmp_path):
    """The checkpoint recovery starts from is MAC'd with the chain key: one written by someone
    without it (a plain SHA-256 digest, as an insider can compute) is refused, and recovery
    replays from further back instead."""
    from controller.durability import checkpoints
    from controller.durability.recovery import recover_report

    path = tmp_path / "journal.sqlite"
    machine = TableMachine(SETTINGS)
    with Journal(path, KEY) as journal:
        for inp in shoe_script(1, decks=1, start_at=5):
            journal.append(inp, machine.handle(inp))
        checkpoints.save_at_shoe_end(journal, machine)
        assert recover_report(journal, SETTINGS).refused is None
    conn = sqlite3.connect(path)
    text = conn.execute("SELECT base FROM checkpoint").fetchone()[0]
    conn.execute("UPDATE checkpoint SET digest=?", (checkpoints.digest(text),))
    conn.commit()
    conn.close()
    with Journal(path, KEY) as journal:
        report = recover_report(journal, SETTINGS)
        assert report.refused is not None and "does not match its digest" in report.refused
        assert report.machine.status() == machine.status()


def test_start_up_refuses_a_journal_cut_behind_its_own_shoe_end_checkpoint(tmp_path):
    """With the head file gone and the head row fixed, the checkpoint stored in the journal
    (MAC'd with the key) still shows where the journal reached."""
    from controller.durability import checkpoints
    from controller.durability.head_file import tail_problem
    from support import tampering

    path = tmp_path / "journal.sqlite"
    machine = TableMachine(SETTINGS)
    with Journal(path, KEY) as journal:
        for inp in shoe_script(1, decks=1, start_at=5):
            journal.append(inp, machine.handle(inp))
        checkpoints.save_at_shoe_end(journal, machine)
        assert tail_problem(path, journal.chain) is None
        chain = journal.chain
    tampering.truncate_tail(path, 3)
    problem = tail_problem(path, chain)
    assert problem is not None and "but its shoe-end checkpoint follows record" in problem


def test_the_archive_command_takes_the_key_and_verify_checks_archives_with_it(tmp_path):
    import subprocess
    import sys

    path, key_file = tmp_path / "journal.sqlite", tmp_path / "journal.key"
    key_file.write_text(KEY.hex() + "\n")
    key = key_file.read_bytes().rstrip(b"\n")
    settings = MachineSettings(table_id="T7")
    machine = TableMachine(settings)
    with Journal(path, key) as journal:
        for inp in shoe_script(3, start_at=5):
            journal.append(inp, machine.handle(inp))

    def pokdeng(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller", "journal", *args, str(path)],
                              capture_output=True, text=True, timeout=120)

    refused = pokdeng("archive", "--older-than", "0s")
    assert refused.returncode == 1 and "chain is keyed" in refused.stderr
    done = pokdeng("archive", "--older-than", "0s", "--key-file", str(key_file))
    assert done.returncode == 0 and "archived records 1-" in done.stdout, done.stderr
    checked = pokdeng("verify", "--key-file", str(key_file))
    assert checked.returncode == 0 and "(1 archive(s) and the live journal)" in checked.stdout
