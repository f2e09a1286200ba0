"""The daemon's side of the screens (``controller/service/screens/link.py``) in this process,
with its real screen process, a real journal (a demo table's) and real HTTP: a stopped screen
process costs the table's threads no wait, the feed stays bounded and drops to a catch-up
from the journal, and the screen is whole again once the process reads again."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from controller.display.settings import DisplaySettings
from controller.service.clock.table_clock import TableClock
from controller.service.config.settings import LoggingConfig
from controller.service.display_link import shoe_history
from controller.service.screens import link as link_module
from controller.service.screens.link import ScreenLink
from controller.service.screens.wire import SealedFilter
from controller.service.status_board import StatusBoard
from controller.service.telemetry.notify import Notifier
from support.display_helpers import SCREENS_S, SseReader
from support.histories import play
from support.waiting import wait_until

ROUNDS = 3
SO_ATTACH_FILTER = 26  # linux/asm-generic/socket.h


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("table")
    play(state, ROUNDS)
    return state / "journal.sqlite"


@pytest.fixture
def linked(journal: Path) -> Iterator[tuple[ScreenLink, StatusBoard]]:
    board = StatusBoard(TableClock(), Notifier({}))
    board.publish({"state": "ready", "table": "DEMO-1", "shoe": 1, "round": ROUNDS,
                   "rounds_played": ROUNDS, "betting_open": False})
    link = ScreenLink(DisplaySettings(port=0), board, TableClock(),
                      lambda: shoe_history(str(journal)), None, LoggingConfig(), "DEMO-1")
    link.start()
    board.subscribe_changes(link.status_changed)
    try:
        yield link, board
    finally:
        pid = link.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        link.close()


def results_rounds(reader: SseReader) -> list[int]:
    for event, data in reversed(reader.taken()):
        if event == "results":
            return [r["round"] for r in data]
        if event == "state":
            return [r["round"] for r in data["results"]]
    return []


@pytest.mark.slow
def test_a_stopped_screen_process_never_holds_the_table_up_and_catches_up_from_the_journal(
        linked: tuple[ScreenLink, StatusBoard]) -> None:
    link, board = linked
    wait_until(lambda: link.pid is not None, SCREENS_S, "the screen process")
    pid = link.pid
    assert pid is not None
    with contextlib.closing(SseReader(link.port)) as page:
        page.wait_status(lambda v: v["rounds_played"] == ROUNDS, SCREENS_S)
        wait_until(lambda: results_rounds(page) == [3, 2, 1], SCREENS_S,
                   "the shoe from the journal")
        os.kill(pid, signal.SIGSTOP)
        # The table publishes on (each status ~2 KB, 3 MB in all: three times the feed's
        # bound, far beyond the pipe's); the owner thread's calls return every time.
        published = threading.Event()

        def owner() -> None:
            for n in range(1500):
                board.publish({"state": "ready", "table": "DEMO-1", "shoe": 1,
                               "round": ROUNDS, "rounds_played": ROUNDS, "seq": n,
                               "betting_open": False, "prompt": "x" * 2000})
                link.offer_events([{"seq": 10_000 + n, "type": "card_drawn"}])
            board.publish({"state": "ready", "table": "DEMO-1", "shoe": 1, "round": ROUNDS,
                           "rounds_played": 99, "betting_open": False})
            published.set()

        threading.Thread(target=owner, daemon=True).start()
        assert published.wait(60), "the owner thread waited for a stopped screen process"
        wait_until(lambda: link.drops > 0, 10, "the feed to drop to a catch-up")
        assert link._pending_bytes <= link_module.MAX_PENDING_BYTES + 64 * 1024
        assert link.pid == pid  # stopped, not given up on (before STUCK_S)
        os.kill(pid, signal.SIGCONT)
        page.wait_status(lambda v: v["rounds_played"] == 99, SCREENS_S)
        wait_until(lambda: link.catch_ups == 2, 10, "the catch-up after the stop")
        assert results_rounds(page) == [3, 2, 1]  # rebuilt from the journal, whole


def test_the_filter_lets_no_result_of_an_open_round_through() -> None:
    seal = SealedFilter()
    opened = {"seq": 1, "type": "round_opened", "shoe": 1, "round": 4, "data": {}}
    result = {"seq": 2, "type": "round_result", "shoe": 1, "round": 4,
              "data": {"hands": {"P1": {"cards": ["QH", "5S"]}}}}
    assert seal.events([opened, result]) == [opened]  # refused while its betting is open
    closed = {"seq": 3, "type": "betting_closed", "shoe": 1, "round": 4, "data": {}}
    drawn = {"seq": 4, "type": "card_drawn", "shoe": 1, "round": 4, "data": {}}
    assert seal.events([closed, drawn, dict(result, seq=5)]) == [dict(result, seq=5)]
    assert "hands" not in seal.status({"betting_open": True, "hands": {"P1": {}}})
    assert seal.status({"betting_open": False, "hands": {"P1": {}}})["hands"] == {"P1": {}}


def test_the_screen_process_refuses_a_bad_feed_line_by_its_number_and_keeps_the_rest(
        ) -> None:
    """A line that is not a feed message costs that line (logged with its number), not the
    messages around it."""
    from controller.display.server import DisplayServer
    from controller.service.screens.child import FeedState, follow
    from controller.service.screens.wire import message

    state = FeedState()
    display = DisplayServer(DisplaySettings(port=0), state.snapshot, backends=state.backends)
    display.start()
    try:
        lines = [message("status", status={"state": "ready", "round": 7}, now=1.0, mono=0.0,
                         speed=1.0),
                 b"{not json\n",
                 message("what", x=1),
                 message("status", status={"state": "betting", "round": 8}, now=2.0, mono=0.0,
                         speed=1.0)]
        with capture_logs() as logs:
            assert follow(lines, display, state) == 2
        assert state.snapshot()[1]["round"] == 8 and state.live()
        refused = [r for r in logs if r["event"] == "screens: a feed message refused"]
        assert [(r["log_level"], r["line"]) for r in refused] == [("error", 2), ("error", 3)]
        assert refused[1]["problem"] == "unknown kind 'what'"
    finally:
        display.close()


@pytest.mark.slow
def test_a_screen_process_that_takes_nothing_is_killed_and_started_again(
        linked: tuple[ScreenLink, StatusBoard], monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped for longer than ``STUCK_S`` (1 s here, 30 s in the table) with its feed full:
    the link kills it and starts another, which a page reaches at the same address."""
    link, board = linked
    monkeypatch.setattr(link_module, "STUCK_S", 1.0)
    wait_until(lambda: link.pid is not None, SCREENS_S, "the screen process")
    stuck = link.pid
    assert stuck is not None
    os.kill(stuck, signal.SIGSTOP)
    n = 0

    def replaced() -> bool:
        nonlocal n
        n += 1  # statuses of ~2 KB keep coming: the pipe fills, the feed waits
        board.publish({"state": "ready", "table": "DEMO-1", "shoe": 1, "round": ROUNDS,
                       "rounds_played": ROUNDS, "seq": n, "betting_open": False,
                       "prompt": "x" * 2000})
        return link.pid not in (None, stuck)

    wait_until(replaced, 30, "a new screen process", interval=0.01)
    with pytest.raises(ChildProcessError):  # killed and reaped by the link
        os.waitpid(stuck, os.WNOHANG)
    board.publish({"state": "ready", "table": "DEMO-1", "shoe": 1, "round": ROUNDS,
                   "rounds_played": 42, "betting_open": False})
    with contextlib.closing(SseReader(link.port)) as page:
        page.wait_status(lambda v: v["rounds_played"] == 42, SCREENS_S)
        wait_until(lambda: results_rounds(page) == [3, 2, 1], SCREENS_S,
                   "the shoe from the journal")


def test_a_display_socket_shut_down_by_a_screen_process_listens_again_for_the_next(
        linked: tuple[ScreenLink, StatusBoard]) -> None:
    """Each screen process holds the daemon's own listening socket: one that shuts it down
    (here the test does, on the same socket) and dies would leave every later process
    refusing every page. The link listens again, at the same address, before the next."""
    link, _ = linked
    wait_until(lambda: link.pid is not None, SCREENS_S, "the screen process")
    first, port = link.pid, link.port
    assert first is not None
    assert link._listening is not None
    link._listening.shutdown(socket.SHUT_RDWR)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: link.pid not in (None, first), SCREENS_S, "the next screen process")
    assert link.port == port
    with contextlib.closing(SseReader(port)) as page:
        page.wait_status(lambda v: v.get("table") == "DEMO-1", SCREENS_S)


def attach_drop_all_filter(sock: socket.socket, lock: bool) -> None:
    """What a screen process outside its system call filter could do to the shared socket:
    a packet filter that drops every connection, locked so that no one can take it off."""
    import ctypes
    import struct

    drop_all = ctypes.create_string_buffer(struct.pack("=HBBI", 0x06, 0, 0, 0))  # ret 0
    program = struct.pack("@HP", 1, ctypes.addressof(drop_all))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, program)
    if lock:
        sock.setsockopt(socket.SOL_SOCKET, link_module.SO_LOCK_FILTER, 1)


def spoiled_then_served_again(link: ScreenLink, spoil: Callable[[socket.socket], None]) -> None:
    """``spoil`` the display's socket (the same one the running screen process holds) and
    see the link end that process, and the next one serve the pages at the same address."""
    wait_until(lambda: link.pid is not None, SCREENS_S, "the screen process")
    first, port = link.pid, link.port
    assert first is not None and link._listening is not None
    spoil(link._listening)
    wait_until(lambda: link.pid not in (None, first), SCREENS_S, "the next screen process")
    with pytest.raises(ChildProcessError):
        os.waitpid(first, os.WNOHANG)  # the one that spoiled it was ended, not left serving
    assert link.port == port
    with contextlib.closing(SseReader(port)) as page:
        page.wait_status(lambda v: v.get("table") == "DEMO-1", SCREENS_S)


def test_a_display_socket_shut_down_by_a_running_screen_process_is_noticed(
        linked: tuple[ScreenLink, StatusBoard]) -> None:
    """A screen process that shuts the shared socket down and lives on, reading its feed,
    serves nothing: the link notices, starts another, and the pages are back at the address."""
    spoiled_then_served_again(linked[0], lambda sock: sock.shutdown(socket.SHUT_RDWR))


def test_a_packet_filter_locked_on_the_display_socket_is_not_handed_on(
        linked: tuple[ScreenLink, StatusBoard]) -> None:
    def lock_a_drop_all_filter(sock: socket.socket) -> None:
        attach_drop_all_filter(sock, lock=True)
        with pytest.raises(OSError):  # the filter drops it: no connection is taken
            socket.create_connection(sock.getsockname()[:2], timeout=1).close()

    spoiled_then_served_again(linked[0], lock_a_drop_all_filter)


def test_a_packet_filter_not_locked_is_taken_off_and_said(
        linked: tuple[ScreenLink, StatusBoard]) -> None:
    link, _ = linked
    wait_until(lambda: link.pid is not None, SCREENS_S, "the screen process")
    first, port = link.pid, link.port
    assert link._listening is not None
    with capture_logs() as logs:
        attach_drop_all_filter(link._listening, lock=False)
        wait_until(lambda: any("packet filter had been put" in entry["event"] for entry in logs),
                   SCREENS_S, "the filter taken off")
    with contextlib.closing(SseReader(port)) as page:
        page.wait_status(lambda v: v.get("table") == "DEMO-1", SCREENS_S)
    assert link.pid == first  # nothing else was wrong: the same process serves on
