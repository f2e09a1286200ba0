"""Journal retention: closed, delivered shoes move to gzip archives; the chain still holds as one,
recovery starts from the checkpoint at the cut, and nothing undelivered is ever archived."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.durability.archives.archive import (
    MANIFEST_NAME,
    ArchiveError,
    archive_closed_shoes,
    archive_dir_for,
    export_with_archives,
    parse_duration,
    verify_with_archives,
)
from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal, export_events, verify_file
from controller.durability.recovery import recover
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import DeviceStatus
from controller.table.machine import MachineSettings, TableMachine
from controller.transports import create

SETTINGS = MachineSettings(table_id="T7", decks=1)  # one-deck shoes: ~3 rounds each, fast


class Table:
    """A journal written the daemon's way (machine, then append), shoe after shoe."""

    def __init__(self, path: Path):
        self.path = path
        self.machine = TableMachine(SETTINGS)
        self.journal = Journal(path)
        self.events: list[dict] = []
        self.clock = 0.0
        self.shoe_ends: list[float] = []   # wall time right after each shoe_ended was written

    def feed(self, inputs) -> None:
        for inp in inputs:
            events = self.machine.handle(inp)
            self.journal.append(inp, events)
            self.events.extend(events)
            self.clock = max(self.clock, inp.at)
            if any(e["type"] == "shoe_ended" for e in events):
                self.shoe_ends.append(time.time())
                time.sleep(0.01)  # shoes end at distinct times

    def shoe(self, seed: int) -> None:
        self.feed(shoe_script(seed, decks=1, start_at=self.clock + 5))

    def between_shoes(self) -> None:
        at = self.clock + 1
        self.feed([DeviceStatus(at=at, name="panel", connected=False),
                   DeviceStatus(at=at + 1, name="panel", connected=True)])

    def close(self) -> None:
        self.journal.close()


@pytest.fixture
def table(tmp_path):
    t = Table(tmp_path / "journal.sqlite")
    yield t
    t.close()


def live_records(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [n for (n,) in conn.execute("SELECT n FROM records ORDER BY n")]
    finally:
        conn.close()


def test_archive_then_recover_continues_with_the_same_status_and_the_next_seq(table):
    for seed in (1, 2):
        table.shoe(seed)
        table.between_shoes()
    table.shoe(3)
    half = shoe_script(4, decks=1, start_at=table.clock + 5)
    table.feed(half[:40])                     # shoe 4 open, mid-round
    total_records, total_events = table.journal.record_count(), len(table.events)

    # shoes 1 and 2 are older than the cut-off, shoe 3 is not
    result = archive_closed_shoes(table.path, 0.0, now=table.shoe_ends[1] + 0.001,
                                  settings=SETTINGS)
    assert result.archived and result.shoes == (1, 2)
    assert result.first_record == 1 and result.first_seq == 1
    shoe2_end = next(e["seq"] for e in table.events
                     if e["type"] == "shoe_ended" and e["shoe"] == 2)
    assert result.last_seq == shoe2_end
    live = live_records(table.path)
    assert live[0] == result.last_record + 1 and live[-1] == total_records
    assert result.file is not None and result.file.parent == archive_dir_for(table.path)

    check = verify_with_archives(table.path)
    assert check.ok, check.describe()
    assert (check.records, check.events, check.archives) == (total_records, total_events, 1)
    assert verify_file(table.path).ok   # the live journal alone, from its base
    assert [json.loads(b) for b in export_with_archives(table.path)] == table.events
    assert [json.loads(b)["seq"] for b in export_events(table.path)][0] == shoe2_end + 1

    # the daemon's restart: reopen, recover (checkpoint + live records), carry on
    table.journal.close()
    with Journal(table.path) as journal:
        assert journal.last_event_seq() == total_events
        recovered = recover(journal, SETTINGS)
        assert recovered.status() == table.machine.status()
        for inp in half[40:]:
            events = recovered.handle(inp)
            assert events == table.machine.handle(inp)
            journal.append(inp, events)
            table.events.extend(events)
    assert table.events[-1]["seq"] == len(table.events)
    assert verify_with_archives(table.path).ok
    table.journal = Journal(table.path)


def test_second_archive_continues_the_chain_and_everything_can_be_archived(table):
    table.shoe(1)
    assert archive_closed_shoes(table.path, 0.0, settings=SETTINGS).archived
    table.between_shoes()
    table.shoe(2)
    second = archive_closed_shoes(table.path, 0.0, settings=SETTINGS)
    assert second.archived and second.shoes == (2,)
    assert live_records(table.path) == []    # the journal ended on shoe 2's shoe_ended
    check = verify_with_archives(table.path)
    assert check.ok and check.archives == 2, check.describe()
    assert [json.loads(b) for b in export_with_archives(table.path)] == table.events

    table.journal.close()
    table.journal = Journal(table.path)       # an empty live journal opens at the base
    assert table.journal.record_count() == second.last_record
    recovered = recover(table.journal, SETTINGS)
    assert recovered.status() == table.machine.status()
    table.machine = recovered
    table.shoe(3)                              # numbering and the chain carry on
    assert table.events[-1]["seq"] == len(table.events)
    assert table.events[-1]["shoe"] == 3
    assert verify_with_archives(table.path).ok
    assert archive_closed_shoes(table.path, 3600.0, settings=SETTINGS).archived is False


def test_nothing_undelivered_is_archived_and_the_outbox_delivers_the_rest(table, tmp_path):
    table.shoe(1)
    table.between_shoes()
    table.shoe(2)
    shoe1_end = next(e["seq"] for e in table.events if e["type"] == "shoe_ended")
    conn = sqlite3.connect(table.path)
    with conn:
        conn.execute("INSERT INTO delivery(transport, last_seq, updated) VALUES "
                     "('file', ?, 0), ('http', ?, 0)", (shoe1_end - 1, len(table.events)))
    conn.close()

    refused = archive_closed_shoes(table.path, 0.0, settings=SETTINGS)
    assert not refused.archived and "delivered only up to" in refused.reason
    assert live_records(table.path)[0] == 1

    conn = sqlite3.connect(table.path)
    with conn:
        conn.execute("UPDATE delivery SET last_seq=? WHERE transport='file'", (shoe1_end + 3,))
    conn.close()
    partial = archive_closed_shoes(table.path, 0.0, settings=SETTINGS)
    assert partial.archived and partial.shoes == (1,) and partial.last_seq <= shoe1_end + 3

    # the lagging transport, a real file sink, picks up from its position: nothing lost
    sink = tmp_path / "sink.jsonl"
    outbox = Outbox(table.path, [create("file", {"path": str(sink)}, table="T7")],
                    idle_poll_s=0.05)
    # positions are per transport name; a "file" transport resumes at shoe1_end + 3
    with outbox:
        assert outbox.wait_delivered(len(table.events), 10)
    delivered = [json.loads(line)["seq"] for line in sink.read_text().splitlines()]
    assert delivered == list(range(shoe1_end + 4, len(table.events) + 1))
    assert verify_with_archives(table.path).ok


def test_delivery_position_is_checked_again_under_the_write_lock(table, monkeypatch):
    """A transport row added between planning and the delete stops the cut."""
    table.shoe(1)
    import controller.durability.archives.archive as archive

    real_write = archive._write_archive

    def write_then_new_transport(*args, **kwargs):
        path = real_write(*args, **kwargs)
        conn = sqlite3.connect(table.path)
        with conn:
            conn.execute("INSERT INTO delivery(transport, last_seq, updated) "
                         "VALUES ('late', 0, 0)")
        conn.close()
        return path

    monkeypatch.setattr(archive, "_write_archive", write_then_new_transport)
    with pytest.raises(ArchiveError, match="'late' is at seq 0"):
        archive_closed_shoes(table.path, 0.0, settings=SETTINGS)
    assert live_records(table.path)[0] == 1
    # the orphan archive is a copy of live records: verify notes it, the chain holds
    check = verify_with_archives(table.path)
    assert check.ok and any("still live" in n for n in check.notes)


@pytest.fixture
def archived(table):
    for seed in (1, 2, 3):
        table.shoe(seed)
        table.between_shoes()
        assert archive_closed_shoes(table.path, 0.0, settings=SETTINGS).archived
    table.shoe(4)
    directory = archive_dir_for(table.path)
    manifest = json.loads((directory / MANIFEST_NAME).read_text())
    assert len(manifest["archives"]) == 3
    assert verify_with_archives(table.path).ok
    return table, directory, manifest


@pytest.mark.slow
def test_a_changed_byte_in_an_archive_is_named(archived):
    table, directory, manifest = archived
    path = directory / manifest["archives"][1]["file"]
    data = bytearray(path.read_bytes())
    for offset in (12, len(data) // 2, len(data) - 3):   # header, deflate stream, gzip trailer
        damaged = bytearray(data)
        damaged[offset] ^= 0x01
        path.write_bytes(bytes(damaged))
        check = verify_with_archives(table.path)
        assert not check.ok and check.archive == path.name, (offset, check.describe())
    path.write_bytes(bytes(data))
    assert verify_with_archives(table.path).ok


def test_an_edited_record_inside_a_recompressed_archive_names_the_record(archived):
    table, directory, manifest = archived
    path = directory / manifest["archives"][0]["file"]
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    record = json.loads(lines[5])
    record["body"] = record["body"].replace(":", ": ", 1)   # same JSON, other bytes
    lines[5] = json.dumps(record)
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    check = verify_with_archives(table.path)
    assert not check.ok and check.archive == path.name and check.bad_record == record["n"]
    assert "hash does not match" in check.reason and "SHA-256" in check.reason


def test_a_dropped_archive_is_named(archived):
    table, directory, manifest = archived
    (directory / manifest["archives"][1]["file"]).unlink()
    check = verify_with_archives(table.path)
    assert not check.ok and check.archive == manifest["archives"][1]["file"]
    assert "missing" in check.reason


def test_an_archive_dropped_from_the_manifest_too_leaves_a_named_gap(archived):
    table, directory, manifest = archived
    gone = manifest["archives"].pop(1)
    (directory / gone["file"]).unlink()
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest))
    check = verify_with_archives(table.path)
    assert not check.ok and check.bad_record == gone["first_record"]
    assert f"records {gone['first_record']}..{gone['last_record']} are missing" in check.reason


@pytest.mark.parametrize("key", ["prev_hash", "last_hash"])
def test_an_edited_boundary_hash_in_the_manifest_is_named(archived, key):
    table, directory, manifest = archived
    entry = manifest["archives"][1]
    entry[key] = "f" * 64
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest))
    check = verify_with_archives(table.path)
    assert not check.ok and check.archive == entry["file"], check.describe()
    assert key in check.reason or "boundary hash" in check.reason


def test_an_edited_boundary_hash_in_the_live_journal_is_named(archived):
    table, _directory, _manifest = archived
    table.journal.close()
    conn = sqlite3.connect(table.path)
    with conn:
        value = json.loads(conn.execute(
            "SELECT value FROM meta WHERE key='archive_base'").fetchone()[0])
        value["hash"] = "e" * 64
        conn.execute("UPDATE meta SET value=? WHERE key='archive_base'", (json.dumps(value),))
    conn.close()
    check = verify_with_archives(table.path)
    assert not check.ok and check.bad_record == value["records"] + 1
    assert "archive_base" in check.reason
    table.journal = Journal(table.path)


@pytest.mark.slow
def test_cli_archive_verify_export(tmp_path):
    path = tmp_path / "journal.sqlite"
    table = Table(path)
    table.shoe(1)
    table.between_shoes()
    table.shoe(2)
    table.close()
    run = [sys.executable, "-m", "controller", "journal"]
    bad = subprocess.run(run + ["archive", str(path), "--older-than", "soon"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--older-than" in bad.stderr
    kept = subprocess.run(run + ["archive", str(path), "--older-than", "7d"],
                          capture_output=True, text=True)
    assert kept.returncode == 0 and "nothing archived" in kept.stdout
    done = subprocess.run(run + ["archive", str(path), "--older-than", "0s"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "archived records 1-" in done.stdout and "shoe(s) 1, 2" in done.stdout
    ok = subprocess.run(run + ["verify", str(path)], capture_output=True, text=True)
    assert ok.returncode == 0 and "1 archive(s)" in ok.stdout, ok.stderr
    full = subprocess.run(run + ["export", str(path), "--archives"], capture_output=True,
                          text=True)
    assert [json.loads(line) for line in full.stdout.splitlines()] == table.events
    archive = next(archive_dir_for(path).glob("records-*.jsonl.gz"))
    moved = tmp_path / "elsewhere"
    archive_dir_for(path).rename(moved)
    lost = subprocess.run(run + ["verify", str(path)], capture_output=True, text=True)
    assert lost.returncode == 1 and "manifest.json is missing" in lost.stderr
    found = subprocess.run(run + ["verify", str(path), "--archives", str(moved)],
                           capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    (moved / archive.name).write_bytes(b"not gzip at all")
    broken = subprocess.run(run + ["verify", str(path), "--archives", str(moved)],
                            capture_output=True, text=True)
    assert broken.returncode == 1 and archive.name in broken.stderr


def test_parse_duration():
    assert parse_duration("7d") == 7 * 86400
    assert parse_duration("12h") == 43200
    assert parse_duration("90") == 90
    assert parse_duration("1.5w") == 1.5 * 604800
    with pytest.raises(ValueError):
        parse_duration("7 days")


@pytest.mark.slow
def test_the_real_daemon_carries_on_after_its_first_shoe_is_archived(tmp_path):
    """demo (the real daemon) plays a shoe; the shoe is archived; the daemon restarts from the
    checkpoint and plays on: ids continue, the sink gets each event once, the chain holds."""
    state, sink = tmp_path / "state", tmp_path / "events.jsonl"
    demo = [sys.executable, "-m", "controller", "demo", "--speed", "200", "--quiet",
            "--state-dir", str(state), "--events", str(sink), "--seed", "5"]
    first = subprocess.run(demo, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr[-2000:]
    journal = state / "journal.sqlite"
    shoe1 = [json.loads(line) for line in export_events(journal)]
    key_file = state / "journal.key"  # the demo keys its journal's chain
    done = subprocess.run([sys.executable, "-m", "controller", "journal", "archive",
                           str(journal), "--older-than", "0s", "--key-file", str(key_file)],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "shoe(s) 1)" in done.stdout, done.stdout + done.stderr
    assert list(export_events(journal)) == []
    second = subprocess.run(demo + ["--rounds", "2"], capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr[-2000:]
    delivered = [json.loads(line) for line in sink.read_text().splitlines()]
    assert [e["seq"] for e in delivered] == list(range(1, len(delivered) + 1))
    assert [strip_anchor(e) for e in delivered[:len(shoe1)]] == shoe1
    assert delivered[-1]["shoe"] == 2
    assert [json.loads(b) for b in export_with_archives(journal)] == \
        [strip_anchor(e) for e in delivered]
    check = verify_with_archives(journal, key=key_file.read_bytes().rstrip(b"\n"))
    assert check.ok and check.events == len(delivered), check.describe()


def test_a_transport_added_after_archiving_starts_at_the_live_journal(table, tmp_path, caplog):
    table.shoe(1)
    table.between_shoes()
    cut = archive_closed_shoes(table.path, 0.0, settings=SETTINGS)
    sink = tmp_path / "new.jsonl"
    with caplog.at_level("WARNING", logger="pokdeng.outbox"):
        outbox = Outbox(table.path, [create("file", {"path": str(sink)}, table="T7")],
                        idle_poll_s=0.05)
    assert f"events 1-{cut.last_seq} are archived" in caplog.text
    with outbox:
        assert outbox.wait_delivered(len(table.events), 10)
        assert outbox.status()["file"]["backlog"] == 0
    assert [strip_anchor(json.loads(line)) for line in sink.read_text().splitlines()] == \
        table.events[cut.last_seq:]
