"""The journal: durable appends, replay order, and a hash chain that catches any changed byte."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from controller.durability.journal import (
    Journal,
    JournalCorrupt,
    JournalError,
    export_events,
    verify_file,
)
from controller.table.inputs import Button, Tick
from support.journal_helpers import event, fill, sample_inputs

COLUMNS = ("n", "kind", "event_seq", "written", "body", "prev_hash", "hash")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "journal.db"


def test_append_returns_record_numbers_and_replays_inputs_in_order(journal_path):
    inputs = sample_inputs(10)
    with Journal(journal_path) as j:
        first = j.append(inputs[0], [event(1), event(2)])
        second = j.append(inputs[1], [])
        third = j.append(inputs[2], [event(3)])
        assert (first, second, third) == (1, 4, 5)
        assert j.last_event_seq() == 3
    with Journal(journal_path) as j:  # reopened: state comes from the file
        assert j.last_event_seq() == 3
        assert list(j.inputs()) == inputs[:3]
        assert j.last_input() == inputs[2]
        entries = list(j.entries())
        assert [e.record for e in entries] == [1, 4, 5]
        assert [[ev["seq"] for ev in e.events] for e in entries] == [[1, 2], [], [3]]
        assert entries[0].events[0] == event(1)
        assert j.append(inputs[3], [event(4)]) == 7


def test_events_after_pages_in_seq_order(journal_path):
    with Journal(journal_path) as j:
        assert j.last_input() is None and j.events_after(0, 10) == []
        written = fill(j, 30)
        assert j.events_after(0, 1000) == written
        assert [e["seq"] for e in j.events_after(5, 3)] == [6, 7, 8]
        assert j.events_after(j.last_event_seq(), 10) == []


def test_seq_gap_is_refused_and_nothing_is_written(journal_path):
    with Journal(journal_path) as j:
        j.append(Button(0.0, "new_shoe"), [event(1)])
        with pytest.raises(JournalError, match="seq 3 does not follow 1"):
            j.append(Tick(1.0), [event(3)])
        with pytest.raises(JournalError, match="integer seq"):
            j.append(Tick(1.0), [{"id": "x"}])
        assert j.record_count() == 2
        assert j.append(Tick(1.0), [event(2)]) == 3
        assert j.verify().ok


def test_append_many_writes_a_group_in_one_transaction_or_nothing(journal_path):
    inputs = sample_inputs(4)
    with Journal(journal_path) as j:
        j.append(inputs[0], [event(1)])
        # a gap in the group's last entry: none of the group is written
        with pytest.raises(JournalError, match="seq 5 does not follow 3"):
            j.append_many([(inputs[1], [event(2)]), (inputs[2], [event(3), event(5)])])
        assert j.record_count() == 2 and j.last_event_seq() == 1
        first = j.append_many([(inputs[1], [event(2)]), (inputs[2], []),
                               (inputs[3], [event(3), event(4)])])
        assert first == 3
        assert [(e.record, e.seq) for e in j.appended_events()] == [(4, 2), (7, 3), (8, 4)]
        assert j.verify().ok
    with Journal(journal_path) as j:  # reopened: as if each input had been appended alone
        assert list(j.inputs()) == inputs
        assert [[ev["seq"] for ev in e.events] for e in j.entries()] == [[1], [2], [], [3, 4]]
    conn = sqlite3.connect(journal_path)
    try:  # one commit, one time of writing: the group's records share it, the first differs
        written = [w for (w,) in conn.execute("SELECT written FROM records ORDER BY n")]
    finally:
        conn.close()
    assert len(set(written[2:])) == 1 and written[0] != written[2]


def test_verify_ok_counts_records_and_cli_says_so(journal_path):
    with Journal(journal_path) as j:
        fill(j, 12)
        result = j.verify()
        assert result.ok and result.records == j.record_count()
    done = run_cli("journal", "verify", str(journal_path))
    assert done.returncode == 0, done.stderr
    assert "chain holds" in done.stdout


def _flip(value):
    """The same value with one byte changed."""
    if isinstance(value, float):
        return value + 0.001
    if isinstance(value, int):
        return value ^ 0x100  # one bit; far from the other rows' numbers (unique columns)
    middle = len(value) // 2
    replacement = "0" if value[middle] != "0" else "1"
    return value[:middle] + replacement + value[middle + 1:]


@pytest.mark.slow
def test_a_changed_byte_in_any_column_of_any_record_is_caught(journal_path):
    with Journal(journal_path) as j:
        fill(j, 8)
        total = j.record_count()
    conn = sqlite3.connect(journal_path)
    conn.execute("PRAGMA journal_mode=DELETE")  # one file to restore from
    conn.close()
    pristine = journal_path.read_bytes()
    caught = 0
    for n in range(1, total + 1):
        for column in COLUMNS:
            journal_path.write_bytes(pristine)
            conn = sqlite3.connect(journal_path)
            value = conn.execute(f"SELECT {column} FROM records WHERE n=?", (n,)).fetchone()[0]
            if value is None:  # event_seq of an input: give it one
                value = 0
            conn.execute(f"UPDATE records SET {column}=? WHERE n=?", (_flip(value), n))
            conn.commit()
            conn.close()
            result = verify_file(journal_path)
            assert not result.ok, f"record {n} column {column} change not caught"
            # the first bad record is the one changed (or, for a renumbered record, its slot)
            assert result.bad_record == n, (n, column, result)
            caught += 1
    assert caught == total * len(COLUMNS)


def test_deleted_reordered_and_cut_records_are_caught(journal_path):
    with Journal(journal_path) as j:
        fill(j, 6)
        total = j.record_count()
    conn = sqlite3.connect(journal_path)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    pristine = journal_path.read_bytes()

    def tamper(*statements):
        journal_path.write_bytes(pristine)
        c = sqlite3.connect(journal_path)
        for sql in statements:
            c.execute(sql)
        c.commit()
        c.close()
        return verify_file(journal_path)

    gone = tamper("DELETE FROM records WHERE n=3")
    assert not gone.ok and gone.bad_record == 3 and "missing" in gone.reason
    swapped = tamper("UPDATE records SET n=-1 WHERE n=2", "UPDATE records SET n=2 WHERE n=4",
                     "UPDATE records SET n=4 WHERE n=-1")
    assert not swapped.ok and swapped.bad_record == 2
    cut = tamper(f"DELETE FROM records WHERE n={total}")
    assert not cut.ok and cut.bad_record == total and "cut from the end" in cut.reason
    # and a cut journal is not written on top of
    with pytest.raises(JournalCorrupt, match=f"record {total}"):
        Journal(journal_path)


def test_cli_catches_a_byte_flipped_in_the_database_file(journal_path):
    with Journal(journal_path) as j:
        j.append(Button(0.0, "new_shoe"), [event(1, "shoe_started")])
        j.append(Tick(1.0), [event(2, "burn_card_shown", card="QH", burn_count=3)])
        j.append(Tick(2.0), [])
    conn = sqlite3.connect(journal_path)
    conn.execute("PRAGMA journal_mode=DELETE")  # checkpoint: every record now in the main file
    conn.close()
    raw = bytearray(journal_path.read_bytes())
    needle = b'"card":"QH"'
    where = raw.find(needle)
    assert where > 0 and raw.find(needle, where + 1) == -1
    raw[where + len(b'"card":"')] = ord("K")  # QH -> KH, same length: the page stays valid
    journal_path.write_bytes(bytes(raw))
    done = run_cli("journal", "verify", str(journal_path))
    assert done.returncode == 1
    assert "record 4" in done.stderr and "hash does not match" in done.stderr


def test_cli_verify_names_missing_and_foreign_files(tmp_path):
    missing = run_cli("journal", "verify", str(tmp_path / "nope.db"))
    assert missing.returncode == 1 and "no such journal file" in missing.stderr
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (y)").connection.close()
    foreign = run_cli("journal", "verify", str(other))
    assert foreign.returncode == 1 and "not a journal" in foreign.stderr


def test_cli_export_prints_events_as_json_lines(journal_path):
    with Journal(journal_path) as j:
        written = fill(j, 9)
    done = run_cli("journal", "export", str(journal_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [json.loads(line) for line in lines] == written
    assert list(export_events(journal_path)) == lines


def test_cli_export_escapes_control_characters_on_a_terminal(journal_path):
    """A record edited to hold terminal control bytes (ESC ... retitles, clears): on a
    terminal they are written as JSON's \\u escapes (the same JSON value); into a pipe, the
    events stay byte for byte as the backends received them."""
    import pty

    with Journal(journal_path) as j:
        fill(j, 3)
    with sqlite3.connect(journal_path) as conn:
        n, body = conn.execute("SELECT n, body FROM records WHERE kind='event' "
                               "ORDER BY n DESC LIMIT 1").fetchone()
        body = body.replace('"type"', '"x":"\x1b]0;PWNED\x07\x1b[2J\x9b","type"', 1)
        conn.execute("UPDATE records SET body=? WHERE n=?", (body, n))
    master, slave = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "controller", "journal", "export",
                               str(journal_path)], stdout=slave, stderr=subprocess.PIPE,
                              timeout=60)
        os.close(slave)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other side closed: all is read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in shown and "\x9b".encode() not in shown
    assert b"\\u001b]0;PWNED\\u0007\\u001b[2J\\u009b" in shown
    last = json.loads(shown.decode().splitlines()[-1])
    assert last["x"] == "\x1b]0;PWNED\x07\x1b[2J\x9b"  # the same JSON value
    piped = run_cli("journal", "export", str(journal_path))
    assert piped.stdout.splitlines()[-1] == body  # into a pipe: as stored


def test_append_is_durable_when_it_returns(journal_path):
    """A process killed right after append returns keeps everything it acknowledged."""
    child = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from controller.durability.journal import Journal
        from support.journal_helpers import event, sample_inputs
        j = Journal({str(journal_path)!r})
        for i, inp in enumerate(sample_inputs(10_000)):
            j.append(inp, [event(i + 1)])
            print(i + 1, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    acknowledged = 0
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 40:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with Journal(journal_path) as j:
        assert j.last_event_seq() >= acknowledged
        assert j.verify().ok


def test_refuses_a_missing_directory_and_a_foreign_file(tmp_path):
    with pytest.raises(JournalError, match="does not exist"):
        Journal(tmp_path / "no" / "j.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(JournalError, match="junk.db"):
        Journal(junk)
    assert os.path.getsize(junk) == 2100


@pytest.mark.slow
def test_verify_and_export_of_a_journal_being_written(journal_path):
    """The CLI checks a live journal as of one moment: never a false alarm mid-append."""
    child = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from controller.durability.journal import Journal
        from support.journal_helpers import event, sample_inputs
        j = Journal({str(journal_path)!r})
        seq = 0
        for i, inp in enumerate(sample_inputs(100_000)):
            events = [event(seq + 1), event(seq + 2)]
            seq += 2
            j.append(inp, events)
            if i == 20:
                print("writing", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        counts: list[int] = []
        # 15 checks at least, and until the writer was seen to move on: on a busy disk its
        # fsync can hold it longer than 15 quick checks take
        deadline = time.monotonic() + 60
        while len(counts) < 15 or (counts[-1] == counts[0] and time.monotonic() < deadline):
            result = verify_file(journal_path)
            assert result.ok, result.describe()
            counts.append(result.records)
            exported = list(export_events(journal_path))
            assert [json.loads(line)["seq"] for line in exported] == \
                list(range(1, len(exported) + 1))
        assert counts == sorted(counts) and counts[-1] > counts[0]
    finally:
        proc.kill()
        proc.wait(10)
