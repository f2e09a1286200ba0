"""The dealer display in a real browser against the real daemon: ``pokdeng-table demo`` in its
own process (simulated shoe on a pty, simulated USB panel, journal, file sink) with the display
on, and Chromium driven by Playwright reading the page's DOM.

One demo table and one browser for the module, shared by tests that each wait for what they
need (no test relies on another having run first, in any order): a round watched from open to
result (countdown, next-card highlight, nothing of the round in the page before betting closes),
the roadmap against the round results in the events file, a supervisor pause banner, a frozen
daemon noticed by the missing heartbeat, and the page coming back after the daemon is killed
and restarted.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.display.roadmap_svg import COLOURS
from controller.service.control.client import ControlClient, ControlError
from controller.table.procedure import ROUND_TARGETS
from support.daemon_helpers import cli
from support.display_helpers import free_port
from support.sealing import Leaks
from support.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SPEED = 5  # a 15 s betting window lasts 3 s; a card every 0.16 s

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def launched_browser() -> Iterator[Any]:
    """Debian's Chromium, driven by Playwright (never a downloaded build): what each browser
    module's ``browser`` fixture yields, one for the module."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class DemoTable:
    """``pokdeng-table demo`` with the display on a known port, restartable on its state."""

    def __init__(self, root: Path, env: dict[str, str] | None = None):
        self.root = root
        self.env = env or {}  # more of the demo's environment (a locales directory)
        self.state = root / "state"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.events_path = self.state / "events.jsonl"
        self.socket = str(self.state / "control.sock")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "demo", "--speed", str(SPEED), "--seed", "7",
             "--state-dir", str(self.state), "--display-port", str(self.port), "--quiet",
             "--stay"],  # the pages stay up after the shoe's last round, with its results
            stdout=open(self.root / "demo.out", "ab"), stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **self.env})

    def keep_dealing(self) -> None:
        """A demo deals one shoe, then stays up without a dealer: past that, start it again
        on its state (it carries on with a new shoe), for a test that needs rounds to come."""
        status = self.status()
        if status is None or status["state"] != "no_shoe" or not self.results():
            return
        self.kill()
        self.start()
        wait_until(lambda: (lambda s: s is not None and s["state"] != "no_shoe")(
            self.status()), 60, "the demo dealing a new shoe")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        return [json.loads(line) for line in self.events_path.read_text().splitlines()
                if line.endswith("}")]

    def results(self) -> dict[int, dict[str, Any]]:
        return {e["round"]: e for e in self.events() if e["type"] == "round_result"}

    def supervisor(self, action: str) -> dict[str, Any]:
        result = cli("supervisor", "--socket", self.socket, "--json", action)
        return dict(json.loads(result.stdout))

    def status(self) -> dict[str, Any] | None:
        """The table's status over its control socket; None while the daemon is not up."""
        try:
            return ControlClient(self.socket, timeout=5, retry_s=0).status()
        except (ControlError, OSError):
            return None


@pytest.fixture(scope="module")
def table() -> Iterator[DemoTable]:
    root = Path(tempfile.mkdtemp(prefix="disp-", dir="/tmp"))  # short socket paths
    demo = DemoTable(root)
    demo.start()
    yield demo
    demo.kill()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def page(table: DemoTable) -> Iterator[Any]:
    for browser in launched_browser():
        page = browser.new_page(viewport={"width": 1920, "height": 1080})
        wait_until(lambda page=page: _reachable(page, table.url), 30, "the display to answer")
        yield page


def _reachable(page: Any, url: str) -> bool:
    try:
        page.goto(url)
        return True
    except sync_api.Error:
        return False


def seen(page: Any) -> dict[str, Any]:
    """What the page shows now, read from its DOM in one go. ``html`` leaves out the felt
    while it still shows an earlier, settled round's hands (``shown``: that round; they stay
    up until the next round's first card)."""
    return dict(page.evaluate("""() => ({
        html: (() => { const copy = document.documentElement.cloneNode(true);
                       const felt = copy.querySelector('#felt');
                       if (felt && felt.dataset.shownRound) felt.remove();
                       return copy.outerHTML; })(),
        shown: (document.getElementById("felt") || {dataset: {}}).dataset.shownRound || "",
        state: document.body.dataset.state || "",
        link: document.body.dataset.link || "",
        round: document.getElementById("round").textContent,
        left: document.getElementById("seconds").dataset.left || "",
        next: [...document.querySelectorAll(".seat.next")].map(n => n.dataset.seat),
        banner: document.getElementById("banner").hidden ? null
                : document.getElementById("banner").innerText,
        beads: document.querySelectorAll("#roadmap g.bead").length,
    })"""))


def test_a_round_runs_down_deals_and_shows_its_hands_only_after_betting_closes(
        table: DemoTable, page: Any) -> None:
    # A round watched from its first moment of betting (not one the page joined late).
    first = wait_until(lambda: (lambda s: s if s["state"] == "ready" else None)(seen(page)),
                       60, "a table between rounds")
    del first
    opened = wait_until(lambda: (lambda s: s if s["state"] == "betting" else None)(seen(page)),
                        30, "betting to open")
    round_text = opened["round"]
    snapshots = [opened]
    while True:
        now = seen(page)
        if now["state"] != "betting" or now["round"] != round_text:
            break
        snapshots.append(now)
    number = int(round_text.split()[-1])
    result = wait_until(lambda: table.results().get(number), 30, f"round {number}'s result")
    # what the felt kept showing while betting opened is an earlier round, settled
    assert all(not s["shown"] or int(s["shown"]) < number for s in snapshots)

    leaks = Leaks()
    for hand in result["data"]["hands"].values():
        for card in hand["cards"]:
            leaks.add_card(card)
    found = [f for snap in snapshots for f in leaks.found_in("dealer page DOM", snap["html"])]
    assert not found, found[0]

    lefts = [float(s["left"]) for s in snapshots if s["left"]]
    assert len(set(lefts)) >= 3 and lefts[0] > lefts[-1], "the countdown did not run down"
    moves = [s["next"][0] for s in snapshots if s["next"]]
    order = [seat for i, seat in enumerate(moves) if i == 0 or moves[i - 1] != seat]
    assert len(order) >= 4, f"the next-card highlight did not move: {order}"
    targets = iter(ROUND_TARGETS)
    assert all(seat in targets for seat in order), f"out of dealing order: {order}"

    # After the close: the hands as cards, with each position's outcome.
    def p1_shown() -> list[str] | None:
        faces = page.evaluate("""() => [...document.querySelectorAll(
            '.seat[data-seat="P1"] .card:not(.back)')].map(c => c.innerText.replace(/\\s/g, ''))""")
        return faces if len(faces) == 2 else None
    faces = wait_until(p1_shown, 10, "P1's cards face up")
    symbols = {"S": "\u2660", "H": "\u2665", "D": "\u2666", "C": "\u2663"}
    shown = [("10" if c[0] == "T" else c[0]) + symbols[c[1]]
             for c in result["data"]["hands"]["P1"]["cards"]]
    latest = table.results()
    if max(latest) == number:  # the next round's result may already show: compare that one
        assert faces == shown
    outcome = page.evaluate(
        """() => document.querySelector('.seat[data-seat="P1"] .outcome').className""")
    assert outcome.split()[-1] in ("win", "lose", "tie")


def test_the_roadmap_has_a_bead_per_position_per_round_as_the_results_say(
        table: DemoTable, page: Any) -> None:
    wait_until(lambda: len(table.results()) >= 3, 60, "three round results")
    results = table.results()
    wait_until(lambda: seen(page)["beads"] >= 5 * len(results), 10, "the roadmap to catch up")
    beads = page.evaluate("""() => [...document.querySelectorAll('#roadmap g.bead')].map(b => ({
        round: +b.dataset.round, position: +b.dataset.position, outcome: b.dataset.outcome,
        flush: b.dataset.flush, pair: b.dataset.pair,
        fill: b.querySelector('.bead-body').getAttribute('fill'),
        ring: !!b.querySelector('.flush-ring'), dot: !!b.querySelector('.pair-dot')}))""")
    by_place = {(b["round"], b["position"]): b for b in beads}
    results = table.results()
    for number, event in results.items():
        for position in range(1, 6):
            bead = by_place.get((number, position))
            if bead is None and number == max(results):
                continue  # the newest result may be a moment ahead of the page
            assert bead is not None, f"no bead for round {number}, P{position}"
            want = event["data"]["positions"][f"P{position}"]["bead"]
            assert bead["outcome"] == want["result"] and bead["fill"] == COLOURS[want["result"]]
            assert bead["ring"] is want["flush"] and bead["flush"] == str(want["flush"]).lower()
            assert bead["dot"] is want["pair"] and bead["pair"] == str(want["pair"]).lower()
    assert len(beads) % 5 == 0

    # The scoreboard draws the same roadmap, and the last results newest first.
    board = page.context.browser.new_page(viewport={"width": 1920, "height": 1080})
    try:
        board.goto(table.url + "scoreboard")
        wait_until(lambda: board.evaluate(
            "() => document.querySelectorAll('#roadmap g.bead').length") >= len(beads),
            10, "the scoreboard's roadmap")
        rounds = board.evaluate(
            "() => [...document.querySelectorAll('#results li')].map(li => +li.dataset.round)")
        assert rounds and rounds == sorted(rounds, reverse=True) and len(rounds) <= 8
        assert set(rounds) <= set(table.results())
    finally:
        board.close()


def test_a_supervisor_pause_shows_a_banner_that_clears_on_resume(
        table: DemoTable, page: Any) -> None:
    """The pause is taken while betting is open: no card is owed then, so none can come out
    while the table is paused (a card that does becomes the banner's `card_while_paused`
    instead, rightly). Whether the pause landed there is read from the table itself, and a
    pause that missed the window (a slow machine) is undone and tried on the next round."""
    paused = None
    for _attempt in range(5):
        wait_until(lambda: (lambda s: s and s["state"] == "betting" and not s["paused"]
                            and (s["betting_seconds_left"] or 0) >= 5)(table.status()),
                   90, "a round open for betting with time left")
        # straight over the socket: a command-line client would first spend its start-up
        answer = ControlClient(table.socket).supervisor("pause")
        assert answer["ok"] and "paused" in answer["events"], answer
        status = table.status()
        assert status is not None and status["paused"]
        if status["betting_open"] and status["fault"]["code"] == "supervisor_pause":
            paused = status
            break
        assert table.supervisor("resume")["ok"]  # taken after betting closed: try again
    assert paused is not None, "the pause never landed while betting was open"
    banner = wait_until(lambda: seen(page)["banner"], 10, "the pause banner")
    me = pwd.getpwuid(os.getuid()).pw_name  # the journal keeps who; the screen names the role
    assert "A supervisor paused the table." in banner and "paused by a supervisor" in banner
    assert me not in banner.replace("paused by a supervisor", "")
    assert "supervisor_pause" in banner  # the code, small, for docs/faults.md
    assert "Wait for the supervisor to resume the table." in banner  # what to do
    assert table.supervisor("resume")["ok"]
    wait_until(lambda: seen(page)["banner"] is None, 10, "the banner to clear on resume")


def test_a_silent_link_is_noticed_by_the_heartbeat(table: DemoTable, page: Any) -> None:
    """The daemon frozen (SIGSTOP): the connection stays open but says nothing. The page
    misses the status heartbeat, says the link is lost, and is live again once it thaws."""
    assert table.proc is not None
    wait_until(lambda: seen(page)["link"] == "live", 10, "a live page")
    table.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: seen(page)["link"] == "lost", 30, "the page to miss the heartbeat")
    finally:
        table.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: seen(page)["link"] == "live", 30, "the page to be live again")


def test_the_page_comes_back_after_the_daemon_is_killed_and_restarted(
        table: DemoTable, page: Any) -> None:
    # a page that has a round of this shoe to show (however many rounds the table has played)
    before = wait_until(lambda: (lambda s: s if s["link"] == "live" and s["beads"] > 0
                                 else None)(seen(page)), 90, "a round's beads on a live page")
    table.kill()
    wait_until(lambda: seen(page)["link"] == "lost", 20, "the page to notice the lost link")
    table.start()
    back = wait_until(lambda: (lambda s: s if s["link"] == "live" and s["beads"]
                               >= before["beads"] else None)(seen(page)),
                      30, "the page to reconnect and catch up from the journal")
    assert back["beads"] % 5 == 0
    wait_until(lambda: seen(page)["beads"] > back["beads"], 60, "the shoe to carry on")
