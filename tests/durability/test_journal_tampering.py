"""A journal rewritten by someone who can write the file but has no chain key is caught three
ways: ``journal verify --key-file``, ``journal verify --against`` the events a backend received,
and the daemon's start-up (exit 65, before it issues an event id again).

One real table (the demo: the daemon on a simulated Bee-Tek shoe on a pty, keyed journal, file
sink as the backend) plays a few rounds once; each test edits a copy of its state directory
(tests/support/tampering.py) and runs the real commands on it.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from controller.durability.head_file import head_path
from support import tampering

ROUNDS = 3
EX_DATAERR = 65
EX_CONFIG = 78


def pokdeng(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ))


def play(state: Path, rounds: int) -> subprocess.CompletedProcess:
    return pokdeng("demo", "--rounds", str(rounds), "--speed", "200", "--quiet", "--seed", "7",
                   "--state-dir", str(state))


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> Path:
    state = tmp_path_factory.mktemp("played") / "state"
    result = play(state, ROUNDS)
    assert result.returncode == 0, result.stderr[-2000:]
    return state


@pytest.fixture
def table(played, tmp_path) -> Path:
    """A copy of the played table's state directory; its events.jsonl is the backend's copy."""
    state = tmp_path / "state"
    shutil.copytree(played, state, ignore=shutil.ignore_patterns("*.sock", "shoe.pty"))
    return state


def run_daemon(state: Path) -> subprocess.CompletedProcess:
    """``pokdeng-table run`` on the played table's state and key (the demo's settings): a
    journal it refuses stops it before any device is opened."""
    return pokdeng("run", "--config", str(table_config(state)), timeout=60)


def table_config(state: Path) -> Path:
    """A table config for the played state directory, with the demo's key as its key file."""
    config = state / "table.yaml"
    config.write_text(yaml.safe_dump({
        "table": {"id": "DEMO-1", "betting_seconds": 15, "reveal": "auto", "decks": 8},
        "state_dir": str(state),
        "shoe": {"driver": "beetek", "url": str(state / "no-shoe")},
        "control": {"socket": str(state / "c.sock"),
                    "supervisor_group": grp.getgrgid(os.getgid()).gr_name},
        "transports": {"file": {"path": str(state / "events.jsonl")}},
        "journal": {"key_file": str(state / "journal.key")},
        "logging": {"level": "info", "format": "json"}}))
    return config


def verify(state: Path, *extra: str) -> subprocess.CompletedProcess:
    return pokdeng("journal", "verify", str(state / "journal.sqlite"), *extra)


def received(state: Path) -> list[dict]:
    return [json.loads(line) for line in (state / "events.jsonl").read_text().splitlines()]


# -- the untouched table passes everything ---------------------------------------------------

def test_an_untouched_keyed_journal_passes_and_names_its_chain(table) -> None:
    key = str(table / "journal.key")
    result = verify(table, "--key-file", key)
    assert result.returncode == 0, result.stderr
    assert "chain: keyed (HMAC-SHA256)" in result.stdout
    result = verify(table, "--key-file", key, "--against", str(table / "events.jsonl"))
    assert result.returncode == 0, result.stderr
    events = received(table)
    assert f"{len(events)} received events ({len(events)} anchored) match" in result.stdout
    # every event went out anchored at its own journal record
    assert all(e["anchor"]["record"] > 0 and len(e["anchor"]["hash"]) == 64 for e in events)
    assert head_path(table / "journal.sqlite").exists()


def test_the_key_comes_from_the_config_or_the_state_dir_that_names_it(table) -> None:
    for where in (["--state-dir", str(table)], ["--config", str(table_config(table))]):
        result = pokdeng("journal", "verify", *where)
        assert result.returncode == 0, result.stderr
        assert f"{table / 'journal.sqlite'}: chain holds:" in result.stdout
    REWRITES["two cards swapped, every hash recomputed"](table)
    for where in (["--state-dir", str(table)], ["--config", str(table_config(table))]):
        result = pokdeng("journal", "verify", *where)
        assert result.returncode == 1, result.stdout  # the key found checks the MACs


def test_a_journal_cut_before_its_first_record_is_reported_as_such(tmp_path) -> None:
    import sqlite3

    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    no_table = tmp_path / "no-table.sqlite"
    sqlite3.connect(no_table).execute("PRAGMA user_version = 1").connection.commit()
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER)")
    for path in (empty, no_table):
        result = pokdeng("journal", "verify", str(path))
        assert result.returncode == 0, result.stderr
        assert f"{path}: no record yet" in result.stdout
    result = pokdeng("journal", "verify", str(other))
    assert result.returncode == 1
    assert "not a journal" in result.stderr


def key_moved_away(table: Path, tmp_path: Path) -> Path:
    """The demo's key out of the state directory (where `journal verify FILE` finds it)."""
    kept = tmp_path / "kept.key"
    (table / "journal.key").rename(kept)
    return kept


def test_journal_verify_finds_the_demos_key_beside_the_journal(table, tmp_path) -> None:
    assert verify(table).returncode == 0
    REWRITES["two cards swapped, every hash recomputed"](table)
    assert verify(table).returncode == 1  # the key beside it checked the MACs


def test_a_keyed_journal_needs_its_own_key(table, tmp_path) -> None:
    key_moved_away(table, tmp_path)
    result = verify(table)
    assert result.returncode == 3  # not a pass: nothing of a keyed chain holds without its key
    assert "journal.sqlite: MACs NOT checked: its chain is keyed (HMAC-SHA256)" in result.stderr
    against = verify(table, "--against", str(table / "events.jsonl"))
    assert against.returncode == 3  # the same words and status, the anchors checked
    assert "OK against" in against.stdout and "MACs NOT checked" in against.stderr
    wrong = tmp_path / "wrong.key"
    wrong.write_text("0" * 64 + "\n")
    result = verify(table, "--key-file", str(wrong))
    assert result.returncode == 1
    assert "the key given is not this journal's key" in result.stderr
    short = tmp_path / "short.key"
    short.write_text("abc\n")
    result = verify(table, "--key-file", str(short))
    assert result.returncode == 2 and "--key-file: the key in" in result.stderr


# -- three rewrites, each caught three ways ---------------------------------------------------

def _truncate(state: Path) -> str:
    assert tampering.truncate_tail(state / "journal.sqlite", 7) >= 7
    return "cut"


def _drop(state: Path) -> str:
    tampering.drop_middle_entry(state / "journal.sqlite")
    return "dropped"


def _swap(state: Path) -> str:
    tampering.swap_two_cards(state / "journal.sqlite")
    return "swapped"


REWRITES: dict[str, Callable[[Path], str]] = {
    "tail cut at an entry boundary, head fixed": _truncate,
    "middle entry dropped, renumbered, re-chained": _drop,
    "two cards swapped, every hash recomputed": _swap,
}


@pytest.mark.parametrize("rewrite", REWRITES)
def test_keyed_verify_catches(table, rewrite) -> None:
    REWRITES[rewrite](table)
    result = verify(table, "--key-file", str(table / "journal.key"))
    assert result.returncode == 1, result.stdout
    assert "BROKEN" in result.stderr
    if rewrite.startswith("tail"):  # the chain that is left holds: the head file tells
        assert "the journal is behind its head file" in result.stderr
    else:
        assert "hash does not match the record's contents" in result.stderr


@pytest.mark.parametrize("with_key", [True, False], ids=["with key", "without key"])
@pytest.mark.parametrize("rewrite", REWRITES)
def test_verify_against_the_backend_catches(table, tmp_path, rewrite, with_key) -> None:
    REWRITES[rewrite](table)
    key = ["--key-file", str(table / "journal.key")] if with_key else []
    if not with_key:
        key_moved_away(table, tmp_path)
    result = verify(table, *key, "--against", str(table / "events.jsonl"))
    assert result.returncode == 1, result.stdout
    assert "DIFFERS from" in result.stderr
    if not with_key:  # the anchors alone: the backend's copy of every head
        assert "MACs were not checked" in result.stderr
        expected = {"tail": "is not in the journal: its events end at seq",
                    "midd": "differs from the journal's",
                    "two ": "was anchored with hash"}[rewrite[:4]]
        assert expected in result.stderr, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("rewrite", REWRITES)
def test_the_daemon_refuses_to_start_on_a_rewritten_journal(table, rewrite) -> None:
    before = (table / "events.jsonl").read_bytes()
    REWRITES[rewrite](table)
    result = run_daemon(table)
    said = result.stdout + result.stderr  # the daemon's log lines
    assert result.returncode == EX_DATAERR, said[-2000:]
    assert "cannot run on the journal: it is not the journal this table wrote" in said
    expected = ("differs from the head file" if rewrite.startswith("two")  # same length
                else "is behind its head file")
    assert expected in said, said[-2000:]
    assert (table / "events.jsonl").read_bytes() == before  # no id issued again


@pytest.mark.slow
def test_a_tail_cut_without_a_head_file_is_caught_by_the_delivered_positions(table) -> None:
    """With the delivered positions left as they were (the head file gone), the cut is still
    refused: the backend already has those ids."""
    conn_path = table / "journal.sqlite"
    import sqlite3

    conn = sqlite3.connect(conn_path)
    delivered = conn.execute("SELECT last_seq FROM delivery").fetchone()[0]
    conn.close()
    head_path(conn_path).unlink()
    _truncate(table)
    conn = sqlite3.connect(conn_path)
    conn.execute("UPDATE delivery SET last_seq=?", (delivered,))
    conn.commit()
    conn.close()
    result = run_daemon(table)
    said = result.stdout + result.stderr
    assert result.returncode == EX_DATAERR, said[-2000:]
    assert f"has delivered events up to seq {delivered}" in said


@pytest.mark.slow
def test_an_untouched_table_starts_again_and_carries_on(table) -> None:
    before = len(received(table))
    result = play(table, 1)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(received(table)) > before
    assert verify(table, "--key-file", str(table / "journal.key"), "--against",
                  str(table / "events.jsonl")).returncode == 0


# -- downgrades and forged head files ---------------------------------------------------------

@pytest.mark.slow
def test_a_keyed_journal_rewritten_as_plain_is_refused(table, tmp_path) -> None:
    tampering.make_plain(table / "journal.sqlite")
    result = run_daemon(table)
    said = result.stdout + result.stderr
    assert result.returncode == EX_CONFIG, said[-2000:]
    assert "this journal has a plain chain (it was started without a key) but a key was " \
           "given" in said
    result = verify(table, "--key-file", str(table / "journal.key"))
    assert result.returncode == 1 and "plain chain" in result.stderr
    key_moved_away(table, tmp_path)  # a backend has no key
    result = verify(table, "--against", str(table / "events.jsonl"))  # what a backend runs
    assert result.returncode == 1 and "was anchored with hash" in result.stderr


def test_a_forged_head_file_is_refused(table) -> None:
    path = head_path(table / "journal.sqlite")
    head = json.loads(path.read_text())
    head["record"] -= 1
    path.write_text(json.dumps(head))
    result = verify(table, "--key-file", str(table / "journal.key"))
    assert result.returncode == 1
    assert "the head file's MAC does not match the journal's key" in result.stderr


# -- a plain chain: verify cannot tell, the backend's anchors can ------------------------------

def test_a_plain_chain_rewritten_passes_verify_but_not_the_backends_anchors(tmp_path) -> None:
    from controller.durability.delivery.outbox import Outbox
    from controller.durability.journal import Journal
    from controller.transports.file import FileSink, FileSinkSettings
    from support.journal_helpers import TABLE, fill

    path, sink = tmp_path / "journal.sqlite", tmp_path / "events.jsonl"
    with Journal(path) as journal:
        fill(journal, 30)
        with Outbox(path, [FileSink(FileSinkSettings(str(sink)), table=TABLE)]) as box:
            assert box.wait_delivered(journal.last_event_seq(), 10)
    result = verify(tmp_path)
    assert result.returncode == 0 and "chain: plain — anyone who can write the file can " \
                                      "rewrite it" in result.stdout
    tampering.drop_middle_entry(path)
    assert verify(tmp_path).returncode == 0  # the weakness a key removes
    result = verify(tmp_path, "--against", str(sink))
    assert result.returncode == 1 and "differs from the journal's" in result.stderr
