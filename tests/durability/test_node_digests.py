"""A Node.js backend computes ``held``'s digest as the table does: each event of real journals
(this version's, and one an older version wrote with ``15.0`` in it), sent as the table sends
it, parsed by ``JSON.parse`` and hashed over npm's ``canonicalize`` (RFC 8785) in a real node
process, must give the table's own digest."""

from __future__ import annotations

import subprocess

import pytest

from controller.durability.canonical_form import event_digest, legacy_event_digest
from controller.table.events import to_json_line
from support.canonical_journals import (
    events_sent,
    older_writer,
    table_inputs,
    worked_example,
    write_journal,
)
from support.node_packages import NODE_DIR
from support.node_packages import node as node_executable


@pytest.fixture(scope="module")
def node() -> str:
    return node_executable()


def node_digests(node: str, events: list[dict]) -> dict[int, str]:
    wire = "".join(to_json_line(event) + "\n" for event in events)
    done = subprocess.run([node, str(NODE_DIR / "digests.js")], input=wire.encode(),
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    pairs = (line.split() for line in done.stdout.decode().splitlines())
    return {int(seq): digest for seq, digest in pairs}


def test_node_hashes_every_event_of_this_versions_journal_as_the_table(node, tmp_path) -> None:
    write_journal(tmp_path / "journal.sqlite", table_inputs())
    sent = events_sent(tmp_path / "journal.sqlite")
    types = {event["type"] for event in sent}
    assert {"clock_status", "round_opened", "hand_revealed", "round_result"} <= types
    assert node_digests(node, sent) == {event["seq"]: event_digest(event) for event in sent}


def test_node_hashes_an_older_versions_events_with_whole_floats_as_the_table(node,
                                                                            tmp_path) -> None:
    """``15.0`` on the wire is ``15`` to JSON.parse: RFC 8785 writes both as ``15``, so the
    digests agree, where the older documented form (Python's text) did not."""
    with older_writer():
        write_journal(tmp_path / "journal.sqlite", table_inputs())
    sent = events_sent(tmp_path / "journal.sqlite")
    whole = [event for event in sent if "15.0" in to_json_line(event)
             or "16.0" in to_json_line(event)]
    assert len(whole) >= 3  # round_opened's betting_seconds, a clock's max_error_s
    from_node = node_digests(node, sent)
    assert from_node == {event["seq"]: event_digest(event) for event in sent}
    assert all(from_node[event["seq"]] != legacy_event_digest(event) for event in whole)


def test_node_gives_the_digest_of_docs_backend_md_worked_example(node) -> None:
    event, _, digest = worked_example()
    assert node_digests(node, [event]) == {event["seq"]: digest}
