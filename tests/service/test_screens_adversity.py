"""The screen process attacked from outside, on a real daemon (``run --config``) dealing on a
simulated shoe and panel: stopped, killed, flooded, impersonated. The table must deal on,
every card reaching the backend in order, and the screens must come back by themselves
showing the round the table is at (docs/display.md, "How it works")."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from controller.service.screens.link import STUCK_S
from support.daemon_helpers import NotifyListener, log_records, start_daemon, stop_daemon
from support.display_helpers import SseReader, request
from support.screen_siege import DealingTable, cmdline, misbehaving_screen, short_root
from support.waiting import wait_until

#: long enough for a stuck screen process to be noticed, killed and started again on a busy
#: two-core machine: never a speed figure, only how long a test waits before it fails
COMES_BACK_S = STUCK_S + 60


@contextmanager
def dealing_table(wrapper: list[str] | None = None, **env: str) -> Iterator[DealingTable]:
    """A DealingTable at its first round, started with ``env`` added to its environment (and
    its screen process through ``wrapper``)."""
    root = short_root()
    made = DealingTable(root, wrapper=wrapper, **env)
    try:
        made.ready()
        yield made
    finally:
        screen = made.screen_pid()
        if screen is not None:
            os.kill(screen, signal.SIGCONT)  # a stopped one must not outlive the test
        made.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def table() -> Iterator[DealingTable]:
    with dealing_table() as made:
        yield made


def process_state(pid: int) -> str:
    """The process's state letter (``T`` stopped, ``Z`` a zombie), "" once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def ended(pid: int) -> bool:
    """Gone, or a zombie: its sockets closed when it ended, whenever the machine's init (its
    parent once the daemon was killed) gets round to reaping it."""
    return process_state(pid) in ("", "Z")


def shows_round(port: int, played: int) -> bool:
    """A page that connects now is shown the table at ``played`` rounds."""
    reader = SseReader(port)
    try:
        reader.wait_status(lambda v: v.get("rounds_played") == played, COMES_BACK_S)
        return True
    finally:
        reader.close()


@pytest.mark.slow
def test_a_screen_process_stopped_on_a_quiet_table_is_replaced(table: DealingTable) -> None:
    """SIGSTOP between rounds, nothing more dealt: its pipe has room for an hour of
    keep-alives, yet what it has not read says it is stuck; a new one serves the pages."""
    table.deal_round()
    stopped = table.screen_pid()
    assert stopped is not None and shows_round(table.port, 1)
    os.kill(stopped, signal.SIGSTOP)

    wait_until(lambda: table.screen_pid() not in (None, stopped), COMES_BACK_S,
               "a new screen process", interval=0.2)
    assert not Path(f"/proc/{stopped}").exists() or \
        Path(f"/proc/{stopped}/stat").read_text().split(")")[1].split()[0] == "Z"
    assert shows_round(table.port, 1)
    table.deal_round()
    assert shows_round(table.port, 2)
    assert table.delivered_rounds() == table.dealt_rounds()


@pytest.mark.slow
def test_the_screen_process_is_not_handed_the_daemons_secrets_or_service_handles(
        tmp_path: Path) -> None:
    """/proc/<screen>/environ is what a process that answers the network was given: not the
    service manager's notify socket (it is not the daemon), nor where the credentials and
    the journal are. Its command line names no secret either."""
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "backend-secret").write_text("s3cret-of-the-backend\n")
    handed = {"CREDENTIALS_DIRECTORY": str(credentials), "STATE_DIRECTORY": str(tmp_path),
              "WATCHDOG_USEC": "30000000", "POKDENG_OPERATOR_TOKEN": "t0ken-of-the-operator"}
    with dealing_table(**handed) as table:
        table.deal_round()
        screen = wait_until(table.screen_pid, COMES_BACK_S, "the screen process")
        assert shows_round(table.port, 1)
        environ = dict(entry.split("=", 1) for entry in Path(f"/proc/{screen}/environ")
                       .read_text().split("\0") if "=" in entry)
        exposed = sorted({"NOTIFY_SOCKET", *handed} & set(environ))
        assert not exposed, f"the screen process was handed {exposed}"
        seen = Path(f"/proc/{screen}/environ").read_text() + " ".join(cmdline(screen))
        assert "s3cret" not in seen and "t0ken" not in seen and str(credentials) not in seen


@pytest.mark.slow
def test_a_request_that_waited_through_a_restart_is_shown_the_table(
        table: DealingTable) -> None:
    """A studio overlay's ``/state.json`` and ``/roadmap.svg``, asked while the screen
    process is being started again, wait in the socket's backlog: the new process answers
    them with the table as it stands, never a blank screen with an empty roadmap."""
    table.deal_round()
    # one kill each: a process that keeps ending is started again later each time (doubling)
    killed = wait_until(table.screen_pid, COMES_BACK_S, "the screen process")
    assert shows_round(table.port, 1)
    os.kill(killed, signal.SIGKILL)
    status, _, body = request(table.port, "/state.json")
    screen = json.loads(body)
    assert status == 200 and screen["status"]["rounds_played"] == 1, screen["status"]
    assert screen["roadmap"]["rounds"] == 1
    os.kill(wait_until(table.screen_pid, COMES_BACK_S, "the screen process"), signal.SIGKILL)
    status, _, svg = request(table.port, "/roadmap.svg")
    assert status == 200 and b"<circle" in svg, svg[:300]


@pytest.mark.slow
def test_a_daemon_stopped_while_its_screen_process_is_stopped_ends_both(
        table: DealingTable) -> None:
    """SIGTERM to the daemon while its screen process is SIGSTOPped (as the unit does,
    KillMode=mixed: the daemon alone is signalled): the daemon stops cleanly with every card
    sent, and leaves no screen process behind, stopped or orphaned."""
    table.deal_round()
    screen = wait_until(table.screen_pid, COMES_BACK_S, "the screen process")
    os.kill(screen, signal.SIGSTOP)
    table.deal_round()
    assert table.delivered_rounds() == table.dealt_rounds()
    assert stop_daemon(table.proc) == 0, table.log.read_text()[-2000:]
    assert not Path(f"/proc/{screen}").exists(), "the screen process outlived the daemon"


@pytest.mark.slow
def test_rounds_dealt_while_the_screen_process_is_stopped_all_reach_the_backend(
        table: DealingTable) -> None:
    """SIGSTOP while the dealer deals on: every card reaches the backend in order, and the
    screens come back by themselves at the table's round."""
    table.deal_round()
    stopped = wait_until(table.screen_pid, COMES_BACK_S, "the screen process")
    os.kill(stopped, signal.SIGSTOP)
    for _ in range(12):
        table.deal_round()
    assert table.delivered_rounds() == table.dealt_rounds()
    wait_until(lambda: table.screen_pid() not in (None, stopped), COMES_BACK_S,
               "a new screen process", interval=0.2)
    assert shows_round(table.port, 13)
    table.deal_round()
    assert shows_round(table.port, 14)
    assert table.delivered_rounds() == table.dealt_rounds()


@pytest.mark.slow
def test_a_screen_process_that_ends_at_once_on_every_start_is_backed_off() -> None:
    """It exits 0 as soon as it is started, every time: the table deals on, every card
    reaching the backend, and the daemon starts it again later each time (0.5 s doubling
    up to 30 s), one log line each way, never a tight loop of starts."""
    with dealing_table(wrapper=misbehaving_screen("exit")) as table:
        for _ in range(3):
            table.deal_round()
        assert table.delivered_rounds() == table.dealt_rounds()
        wait_until(lambda: len(log_records(table.log, "screens: the screen process is gone; "
                                           "starting it again")) >= 4, 60, "four restarts")
        gone = log_records(table.log, "screens: the screen process is gone; starting it again")
        delays = [record["restart_in_s"] for record in gone]
        assert delays[:4] == [0.5, 1.0, 2.0, 4.0], delays
        assert all(record["why"] == "it ended with status 0" for record in gone)
        started = log_records(table.log, "screens: screen process started")
        assert len(started) <= len(gone) + 1


@pytest.mark.slow
def test_a_line_the_screen_process_writes_is_not_taken_for_the_daemons() -> None:
    """The screen process answers the network: whatever it writes must not pass for the
    daemon's own log lines (here a forged "stopped" from pokdeng.daemon)."""
    with dealing_table(wrapper=misbehaving_screen("forge")) as table:
        table.deal_round()
        wait_until(table.screen_pid, COMES_BACK_S, "the screen process")
        assert shows_round(table.port, 1)
        forged = [record for record in log_records(table.log, "stopped")
                  if record.get("logger") == "pokdeng.daemon" and "forged_by" in record]
        assert not forged, f"the daemon's log holds {forged}"
        # the line is there, as the screen process's: its fields under "screen"
        relayed = log_records(table.log, "screens: stopped")  # one a start
        assert relayed and all(r["logger"] == "pokdeng.screens" and r["screen_pid"] > 0
                               and r["screen"]["forged_by"] for r in relayed), relayed


@pytest.mark.slow
def test_a_daemon_killed_while_its_screen_process_is_stopped_leaves_the_port_free(
        table: DealingTable) -> None:
    """SIGKILL to the daemon (no way down of its own) while its screen process is
    SIGSTOPped: no stopped screen process is left holding the display's port (its process
    group of its own is orphaned, and the kernel ends it), so the daemon started again
    serves the display at the same address."""
    table.deal_round()
    screen = wait_until(table.screen_pid, COMES_BACK_S, "the screen process")
    os.kill(screen, signal.SIGSTOP)
    # stopped before the daemon dies: the kernel ends an orphaned group's stopped members as
    # the group is orphaned; one that a busy machine had not stopped yet would stop after it
    wait_until(lambda: process_state(screen) == "T", COMES_BACK_S,
               "the screen process to stop", interval=0.05)
    stop_daemon(table.proc, signal.SIGKILL)
    wait_until(lambda: ended(screen), COMES_BACK_S, "the stopped screen process to end",
               interval=0.2)
    notify = NotifyListener(table.root / "notify-again")
    again = start_daemon(table.config, notify.path, table.root / "again.log")
    try:
        notify.wait_for("READY", "1", timeout=COMES_BACK_S)
        assert shows_round(table.port, 1)
    finally:
        stop_daemon(again)
        notify.close()
