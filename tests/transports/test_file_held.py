"""The events file says where it stands (docs/backend.md), as an HTTP or MQTT backend does:
its last event of this table, read from the file's end, gives the same position as the
reference ``held_of`` over every event in the file."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from controller.durability.delivery.held import held_at, held_of
from controller.transports import LastEvent, Transport
from controller.transports import file as file_module
from controller.transports.file import FileSink, FileSinkSettings

TABLE = "T1"


def event(seq: int, table: str = TABLE, note: str = "") -> dict[str, Any]:
    return {"v": 1, "id": f"{table}:{seq}", "seq": seq, "table": table, "type": "paused",
            "time": "2026-12-02T00:00:00.000Z", "data": {"note": note},
            "anchor": {"record": seq * 2, "hash": f"{seq:064x}"}}


def told(sink: FileSink) -> Any:
    """What the sink tells the daemon when asked where it stands."""
    said: list[Any] = []
    sink.held_listener = lambda _transport, value: said.append(value)
    sink.ask_held()
    assert len(said) == 1
    return said[0]


def position(sink: FileSink) -> dict[str, Any]:
    value = told(sink)
    assert isinstance(value, LastEvent)
    return held_at(value.event)


def sink_at(path: Path) -> FileSink:
    return FileSink(FileSinkSettings(path=str(path)), table=TABLE)


def test_the_file_tells_where_it_stands(tmp_path: Path) -> None:
    assert FileSink.tells_held and not Transport.tells_held
    sink = sink_at(tmp_path / "events.jsonl")
    assert position(sink) == {"seq": 0}  # no file yet: holds none
    events = [event(n) for n in range(1, 41)]
    sink.deliver(events[:25])
    sink.deliver(events[25:])
    assert position(sink) == held_of(events)


def test_other_tables_lines_a_torn_line_and_a_repeat_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = sink_at(path)
    mine = [event(n) for n in range(1, 11)]
    sink.deliver(mine)
    sink.deliver([event(3, "T2"), event(4, "T2")])
    # a restart sent 7.. again and was killed after 8 (same ids, same bodies)
    sink.deliver([event(7), event(8)])
    sink.close()
    with path.open("ab") as out:
        out.write(json.dumps(event(11, note="torn")).encode()[:30])  # no newline: torn
    assert position(sink_at(path)) == held_of(mine) == {"seq": 10, "sha256": held_of(mine)[
        "sha256"]}


def test_the_last_copy_of_an_event_is_what_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = sink_at(path)
    first = [event(n) for n in range(1, 6)]
    again = event(5, note="another body")  # an id re-issued: the file holds both
    sink.deliver(first)
    sink.deliver([again])
    assert position(sink) == held_of([*first, again])
    assert position(sink) != held_of(first)


@pytest.mark.parametrize("chunk", [16, 100, 1000])
def test_read_from_the_end_across_chunk_boundaries(tmp_path: Path, monkeypatch,
                                                    chunk: int) -> None:
    """Lines longer and shorter than a chunk, this table's events behind many of another
    table's: the tail read gives what reading the whole file gives."""
    monkeypatch.setattr(file_module, "_TAIL_CHUNK", chunk)
    rng = random.Random(chunk)
    for attempt in range(5):
        path = tmp_path / f"events-{attempt}.jsonl"
        sink = sink_at(path)
        mine = [event(n, note="x" * rng.randrange(0, 300)) for n in range(1, rng.randrange(2, 30))]
        sink.deliver(mine)
        sink.deliver([event(n, "T2", "y" * rng.randrange(0, 200)) for n in range(1, 40)])
        assert position(sink) == held_of(mine), (chunk, attempt)


def test_a_line_that_is_not_json_is_passed_over_and_named(tmp_path: Path, caplog) -> None:
    path = tmp_path / "events.jsonl"
    sink = sink_at(path)
    mine = [event(n) for n in range(1, 4)]
    sink.deliver(mine)
    with path.open("ab") as out:
        out.write(b"not json\n")
    assert position(sink) == held_of(mine)
    assert f"{path}: a line near byte" in caplog.text and "not JSON" in caplog.text


def test_an_unreadable_file_fails_the_ask(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").mkdir()  # a directory where the file should be
    sink = sink_at(tmp_path / "events.jsonl")
    with pytest.raises(file_module.TransientError, match="cannot read"):
        sink.ask_held()


def test_a_fifo_planted_at_the_files_name_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A FIFO at the events file's name would hang the reader (an open for reading waits for
    a writer) and swallow what is written: the ask and the write both fail, naming it, at
    once; the events stay queued for the retry (a TransientError)."""
    path = tmp_path / "events.jsonl"
    os.mkfifo(path)
    sink = sink_at(path)
    outcome: list[BaseException] = []

    def ask_then_write() -> None:
        for act in (sink.ask_held, lambda: sink.deliver([event(1)])):
            try:
                act()
            except file_module.TransientError as exc:
                outcome.append(exc)

    worker = threading.Thread(target=ask_then_write, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the sink waited on a FIFO"
    assert [str(e) for e in outcome] == [
        f"cannot read {path}: a FIFO, not a regular file: not opened",
        f"cannot write {path}: a FIFO, not a regular file: not opened"]
