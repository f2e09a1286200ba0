"""The demo table: the real daemon path on simulated devices, no config, no hardware.

``pokdeng-table demo`` starts a simulated Bee-Tek shoe on a pty (``drivers.sim.shoe``) and a
simulated USB button panel (``sim_panel``: the real HID driver on an emulated pyusb backend),
builds a config for them, and runs the same ``Daemon`` that ``run`` runs: drivers → queue →
table machine → journal → outbox → a JSON Lines file sink. A demo *dealer* then plays the table
the way a person would, following only the daemon's sealed status: press ``new_shoe``, draw
the flip card and the burns, press ``start_round``, deal the burn and 12 cards in order, wait
for betting to close, and so on until the cut card's round is settled (or ``--rounds``). Like a
dealer it looks at the table after a press and presses again when the press did not take (a
stalled machine, a panel reconnecting); a card, once out of the shoe, it never deals twice. It
waits as long as the table runs, and stops only with the daemon.

Table time runs ``--speed`` times faster than real time (default 50: a 15 s betting window is
0.3 s), so a whole shoe plays in well under a minute with the table's real rules and timings.

State lives in ``--state-dir`` (default: a new directory under /tmp, printed at the start):
the journal and ``demo.json`` with the shuffle seed. The shoe order is derived from that seed
and the shoe number, and the dealer resumes from ``cards_drawn`` in the recovered status, so a
demo killed at any point and rerun with the same ``--state-dir`` carries on with the same shoe.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from controller.commands.demo_sandbox import (
    FAULT_AT_CARD,
    SUPERVISOR_SECONDS,
    FaultPlan,
    Sandbox,
)
from controller.rules.cards import Card, parse_card
from controller.service.clock.table_clock import TableClock
from controller.service.config.settings import Config, parse_config
from controller.service.control.access import own_group
from controller.service.daemon import Daemon
from controller.service.telemetry.notify import Notifier
from controller.service.trust.journal_key import KEY_FILE_BESIDE
from controller.table.faults import CARD_NO_ROUND
from controller.table.inputs import Actor, Supervisor
from drivers.base import Driver

if TYPE_CHECKING:
    from drivers.sim.panel import SimPanel
    from drivers.sim.shoe import ShoeSimulator

DEMO_TABLE = "DEMO-1"
DEAL_SECONDS = 0.8        # table seconds a dealer takes per card
PAUSE_BETWEEN_ROUNDS = 3  # table seconds the result stays up before the next start_round
# How long a press may take to show before the dealer presses again: real seconds, and as many
# looks at the table (a process frozen for a while has not looked meanwhile).
AGAIN_SECONDS = 2.0
AGAIN_LOOKS = 10
WAITING_SAY_SECONDS = 10.0  # real seconds without progress before the dealer says what it awaits

DEMO_CONFIG = """
table:
  id: {table}
  betting_seconds: 15
  reveal: auto
  decks: 8
state_dir: {state_dir}
shoe:
  driver: beetek
  url: {shoe_link}
  reconnect_seconds: 0.2
panel:
  driver: sim_panel
  reconnect_seconds: 0.2
control:
  socket: {socket}
  supervisor_group: {supervisor_group}
transports:
  file:
    path: {events}
logging:
  level: warning
  format: console
{display}"""
DISPLAY_PORT = 8080       # the dealer display's port when it is free (else any free port)

#: the demo keys its journal's chain with a key of its own, next to the journal
DEMO_KEYED_JOURNAL = """
journal:
  key_file: {key_file}
"""

DEMO_KEY_FILE = KEY_FILE_BESIDE


@dataclass
class DemoOptions:
    rounds: int | None = None
    speed: float = 50.0
    seed: int | None = None
    state_dir: str | None = None
    events: str | None = None
    quiet: bool = False
    display: bool = True
    display_port: int | None = None  # None: DISPLAY_PORT if free, else any free port
    metrics: str | None = None
    stay: bool = False  # after the last round, keep the table and its page up until Ctrl-C
    sandbox: Sandbox | None = None  # --config: the integrator's table id and transports
    sandbox_source: str | None = None  # the sandbox file, named in config errors
    faults: FaultPlan | None = None  # --faults: what the dealer does to the table, and when


class DemoError(Exception):
    """The demo cannot go on; the message says why."""


def shoe_seed(seed: int, shoe: int) -> int:
    """Shoe 1 is shuffled with the demo's seed itself; later shoes with the next numbers."""
    return seed + shoe - 1


def load_state(state_dir: Path, seed: int | None) -> dict[str, Any]:
    """The demo's own state (the seed), created on the first run, kept on reruns."""
    path = state_dir / "demo.json"
    if path.exists():
        state: dict[str, Any] = json.loads(path.read_text())
        if seed is not None and seed != state["seed"]:
            print(f"note: {state_dir} was started with --seed {state['seed']}; "
                  f"carrying on with it", file=sys.stderr)
        return state
    state = {"seed": seed if seed is not None else random.SystemRandom().randrange(1, 10**6),
             "decks": 8}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)
    return state


def demo_key_file(state_dir: Path) -> Path | None:
    """The demo journal's key file: made (mode 0600) with a new state directory; a journal
    that an older demo started without one stays plain."""
    from controller.service.trust.journal_key import make_key_file

    key_file = state_dir / DEMO_KEY_FILE
    if not (state_dir / "journal.sqlite").exists():
        make_key_file(key_file)
    return key_file if key_file.exists() else None


#: the demo's stream graphic: a studio's limits and currency (docs/display.md, display.studio)
DEMO_STUDIO = """  studio:
    currency: PHP
    limits:
      player: {min: 100, max: 50000}
      pair: {min: 50, max: 5000}
"""


def display_port(wanted: int | None) -> int:
    """The port asked for; else DISPLAY_PORT when nothing listens there; else 0 (any free)."""
    if wanted is not None:
        return wanted
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("127.0.0.1", DISPLAY_PORT))
        return DISPLAY_PORT
    except OSError:
        return 0
    finally:
        probe.close()


def demo_config(state_dir: Path, shoe_link: Path, events: Path,
                display: int | None = None, metrics: Path | None = None,
                sandbox: Sandbox | None = None, source: str | None = None) -> Config:
    """The demo table's config; ``display``: the display's port (None: no display);
    ``metrics``: the Prometheus textfile to write (None: none); ``sandbox``: the table id and
    transports of an integrator's sandbox file ``source`` (its errors name that file)."""
    import yaml

    socket = state_dir / "control.sock"
    if len(bytes(socket)) > 100:  # Unix socket paths are limited to 108 bytes
        socket = Path(tempfile.mkdtemp(prefix="pokdeng-demo-")) / "control.sock"
    text = DEMO_CONFIG.format(table=DEMO_TABLE, state_dir=json.dumps(str(state_dir)),
                              shoe_link=json.dumps(str(shoe_link)),
                              socket=json.dumps(str(socket)),
                              supervisor_group=json.dumps(own_group()),
                              events=json.dumps(str(events)),
                              display="" if display is None else
                              f'display:\n  listen: "127.0.0.1:{display}"\n' + DEMO_STUDIO)
    key_file = demo_key_file(state_dir)
    if key_file is not None:
        text += DEMO_KEYED_JOURNAL.format(key_file=json.dumps(str(key_file)))
    data = yaml.safe_load(text)
    if metrics is not None:
        data["metrics"] = {"textfile": str(metrics)}
    if sandbox is not None:
        if sandbox.table is not None:
            data["table"]["id"] = sandbox.table
        data["transports"].update(sandbox.transports)
    return parse_config(data, source or "demo config")


# --- the view ----------------------------------------------------------------------------------

def _card(code: str) -> str:
    return parse_card(code).display()


def _hand_text(hand: dict[str, Any]) -> str:
    cards = " ".join(_card(c) for c in hand["cards"])
    value = hand["value"]
    value_text = f"{value:g}"
    extras = [hand["combo"].replace("_", " ")] if hand.get("combo") else []
    if hand.get("flush") and not hand.get("combo"):
        extras.append("flush")
    if hand.get("pair") and not hand.get("combo"):
        extras.append("pair")
    return f"{cards:<8} {value_text:>3} {', '.join(extras)}".rstrip()


def round_result_lines(event: dict[str, Any]) -> list[str]:
    """A round's result for people: hands, values, combos, outcome and returns per 100."""
    data = event["data"]
    hands, positions = data["hands"], data["positions"]
    lines = [f"Round {event['round']} of shoe {event['shoe']}"
             + ("  (last round)" if data.get("last_round") else "")]
    lines.append(f"  {'Banker':<7}{_hand_text(hands['banker'])}")
    for pos in ("P1", "P2", "P3", "P4", "P5"):
        result = positions[pos]
        outcome = result["outcome"].upper()
        if result.get("odds"):
            outcome += f" {result['odds']}"
        returned = result["player_bet_return"] * 100
        pair = f"   pair bet returns {result['pair_bet_return'] * 100}" if result["pair"] else ""
        lines.append(f"  {pos:<7}{_hand_text(hands[pos]):<40} {outcome:<9} "
                     f"returns {returned:>3}{pair}")
    return lines


def event_line(event: dict[str, Any], speed: float = 1.0) -> str | None:
    """One line for the other events worth showing; None for the quiet ones. ``speed``: how
    much faster than real time the table runs (a table's seconds are told in real ones too)."""
    kind, data = event["type"], event.get("data") or {}
    if kind == "shoe_started":
        return f"=== shoe {event['shoe']} started ==="
    if kind == "burn_card_shown":
        return f"flip card {_card(data['card'])}: burn {data['burn_count']}"
    if kind == "burn_completed":
        burned = data["burned"]
        return f"{burned} card{'' if burned == 1 else 's'} burned; ready"
    if kind == "round_opened":
        seconds = float(data["betting_seconds"])
        real = "" if speed == 1 else f" of table time: {seconds / speed:.2g} s at x{speed:g}"
        return f"round {event['round']}: betting open for {seconds:g} s{real}"
    if kind == "cut_card_drawn":
        return "cut card drawn: this is the shoe's last round"
    if kind == "paused":
        return f"PAUSED: {data.get('reason')} ({data.get('code')})"
    if kind == "resumed":
        return "resumed"
    if kind == "round_cancelled":
        return f"round {event['round']} cancelled, bets refunded: {data.get('reason')}"
    if kind == "shoe_ended":
        return (f"=== shoe {event['shoe']} ended: {data.get('rounds')} rounds, "
                f"{data.get('cards_drawn')} cards drawn ({data.get('reason')}) ===")
    if kind == "device_status":
        return f"{data['device']} {'connected' if data['connected'] else 'DISCONNECTED'}"
    if kind == "input_rejected":
        return f"rejected {data.get('name') or data.get('input')}: {data.get('reason')}"
    if kind == "clock_status":
        step = f"; the wall clock was stepped {data['step_s']:+g} s" if "step_s" in data else ""
        sync = {"synchronised": "synchronised", "not_synchronised": "NOT synchronised"}
        return f"system clock {sync.get(data['sync'], 'sync unknown')}{step}"
    return None


class DemoView:
    """Prints the events off the owner thread (a slow terminal must not slow the table)."""

    def __init__(self, out: TextIO, quiet: bool, speed: float = 1.0):
        self.out = out
        self.quiet = quiet
        self.speed = speed
        self.queue: queue.Queue[list[dict[str, Any]] | None] = queue.Queue()
        self.results = 0
        self.events = 0
        self.shoe_ended = threading.Event()
        self.round_results = threading.Semaphore(0)
        self._thread = threading.Thread(target=self._print_loop, name="demo-view", daemon=True)
        self._closed_output = False

    def start(self) -> None:
        self._thread.start()

    def on_events(self, events: list[dict[str, Any]]) -> None:  # owner thread: be quick
        for event in events:
            self.events += 1
            if event["type"] == "round_result":
                self.results += 1
                self.round_results.release()
            elif event["type"] == "shoe_ended":
                self.shoe_ended.set()
        self.queue.put(events)

    def say(self, line: str) -> None:
        """Print a line of the demo's own among the events (any thread)."""
        self.queue.put([{"type": "_line", "text": line}])

    def close(self) -> None:
        self.queue.put(None)
        self._thread.join(5)

    def _print_loop(self) -> None:
        while True:
            events = self.queue.get()
            if events is None:
                return
            for event in events:
                if event["type"] == "_line":
                    lines = [event["text"]]
                elif event["type"] == "round_result":
                    lines = round_result_lines(event)
                else:
                    show = not self.quiet or event["type"] in ("shoe_ended", "paused")
                    line = event_line(event, self.speed) if show else None
                    lines = [line] if line else []
                for line in lines:
                    self._write(line + "\n")
            self._write("")

    def _write(self, text: str) -> None:
        if self._closed_output:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except (BrokenPipeError, ValueError):  # `demo | head`: stop printing, keep playing
            self._closed_output = True


# --- the dealer --------------------------------------------------------------------------------

def _connected(driver: Driver) -> bool:
    """Is this panel driver connected? (A USB panel says so with its ``connected`` event.)"""
    connected: threading.Event | None = getattr(driver, "connected", None)
    return connected is not None and connected.is_set()


@dataclass
class _Press:
    """A button the dealer pressed and is waiting to see the table take."""

    name: str
    at: float
    looks: int = 0  # looks at the table since


class DemoDealer:
    """Plays the table from the daemon's sealed status, as a dealer would."""

    def __init__(self, daemon: Daemon, shoe_sim: ShoeSimulator, seed: int, decks: int,
                 rounds: int | None, view: DemoView, faults: FaultPlan | None = None):
        self.daemon = daemon
        self.shoe_sim = shoe_sim
        self.seed = seed
        self.decks = decks
        self.rounds = rounds
        self.view = view
        self.error: str | None = None
        self._order: tuple[int, list[Card], int] | None = None  # shoe, cards, cut position
        self._sent: tuple[int, int] | None = None  # (shoe, index) of the last card sent
        self._waiting_on: _Press | None = None  # a press the table has not shown yet
        self.presses_again = 0  # presses that did not take the first time
        self._thread = threading.Thread(target=self._main, name="demo-dealer", daemon=True)
        self._stop = threading.Event()
        self.stay = False  # keep the table up once the rounds are played (--stay)
        self.faults = faults or FaultPlan()
        self.rounds_started = 0  # rounds this demo saw open (across the sandbox's restarts)
        self._round: tuple[Any, Any] | None = None  # (shoe, round) of the round seen open
        self._round_first_drawn = 0  # the shoe's cards drawn when that round opened
        self._fault_done: tuple[Any, Any] | None = None  # the round whose fault was made
        self._results_at_start: int | None = None
        #: set when the dealer stopped the daemon for a restart: real seconds to stay off
        self.restart_after: float | None = None

    def start(self) -> None:
        if self._thread.ident is not None:  # a new daemon after a restart: a new turn
            self._thread = threading.Thread(target=self._main, name="demo-dealer",
                                            daemon=True)
            self._stop = threading.Event()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # never started when the daemon could not start
            self._thread.join(5)

    @property
    def panel(self) -> SimPanel:
        from drivers.sim.panel import SimPanel

        panel = next(d for d in self.daemon.drivers if getattr(d, "device", "") == "panel")
        assert isinstance(panel, SimPanel)  # the demo's config names sim_panel
        return panel

    def _cards_for(self, shoe: int) -> tuple[list[Card], int]:
        from drivers.sim.shoe import cut_card_position, shuffled_shoe

        if self._order is None or self._order[0] != shoe:
            seed = shoe_seed(self.seed, shoe)
            cards = shuffled_shoe(seed, self.decks)
            self._order = (shoe, cards, cut_card_position(seed, len(cards)))
        return self._order[1], self._order[2]

    def _sleep_table(self, table_seconds: float) -> None:
        self._stop.wait(self.daemon.clock.real_seconds(table_seconds))

    def _main(self) -> None:
        try:
            self._play()
            if self.restart_after is not None:
                return  # the daemon is stopping for the sandbox's restart; main starts it again
            if self.stay and not self.daemon.stopping:
                self.view.say("the table and its page stay up: Ctrl-C ends the demo")
                return
        except DemoError as exc:
            self.error = str(exc)
        except Exception as exc:  # the demo must end, not hang, on a surprise
            self.error = f"demo dealer failed: {exc!r}"
        self.daemon.request_stop()

    def _wait_devices(self) -> dict[str, Any]:
        said_at = time.monotonic()
        version = -1
        while not self._stop.is_set() and not self.daemon.stopping:
            version, status = self.daemon.wait_for_change(version, 0.2)
            panel_up = any(_connected(d) for d in self.daemon.drivers
                           if getattr(d, "device", "") == "panel")
            # pyserial empties a port's input as it opens it: a card sent before the table has
            # the shoe's port open can be lost, and the table would wait for it for ever.
            shoe_up = any(getattr(getattr(d, "link", None), "connected", None) is True
                          for d in self.daemon.drivers if getattr(d, "device", "") == "shoe")
            if status.get("state") not in ("starting",) and panel_up and shoe_up:
                return status
            if time.monotonic() - said_at > WAITING_SAY_SECONDS:
                said_at = time.monotonic()
                missing = [name for name, up in (("panel", panel_up), ("shoe", shoe_up)) if not up]
                waiting_for = " and ".join(missing) or "table"
                self.view.say(f"dealer: waiting for the simulated {waiting_for} to connect")
        raise DemoError("stopped")

    def _play(self) -> None:
        status = self._wait_devices()
        if self._results_at_start is None:
            self._results_at_start = self.view.results
        results_at_start = self._results_at_start
        version, last_progress = -1, time.monotonic()
        last_key: Any = None
        # The dealer plays for as long as the table runs: only the daemon stopping ends it,
        # or a drain (the supervisor's "safe to stop": no round will start).
        while not self._stop.is_set() and not self.daemon.stopping:
            version, status = self.daemon.wait_for_change(version, 0.2)
            if status.get("drained"):
                self.view.say("table drained (supervisor drain): safe to stop; the demo ends")
                return
            if self.view.shoe_ended.is_set() and status.get("state") == "no_shoe":
                return
            if self.rounds is not None and self.view.results - results_at_start >= self.rounds \
                    and status.get("state") in ("ready", "no_shoe"):
                return
            key = (status.get("state"), status.get("cards_drawn"), status.get("round"),
                   status.get("paused"), status.get("betting_open"))
            now = time.monotonic()
            if key != last_key:
                last_key, last_progress = key, now
                self._waiting_on = None
                self._note_round(status)
                self._act(status)
                if self.restart_after is not None:
                    return
            elif self._did_not_take(status, now):
                # the table is where it was before the press: look again, and press again
                assert self._waiting_on is not None
                self.presses_again += 1
                self.view.say(f"dealer: the table did not take {self._waiting_on.name}; "
                              "pressing it again")
                self._act(status, again=True)
            elif now - last_progress > WAITING_SAY_SECONDS:
                last_progress = now  # say it once in a while, and keep waiting
                self.view.say(f"dealer: waiting (state {status.get('state')}: "
                              f"{status.get('prompt')})")

    def _did_not_take(self, status: dict[str, Any], now: float) -> bool:
        press = self._waiting_on
        if press is None or status.get("paused"):
            return False  # nothing to show; or a supervisor will say what happens next
        press.looks += 1
        return press.looks >= AGAIN_LOOKS and now - press.at >= AGAIN_SECONDS

    def _press(self, name: str) -> None:
        self.panel.press(name)
        self._waiting_on = _Press(name, time.monotonic())

    def _act(self, status: dict[str, Any], again: bool = False) -> None:
        """Do what the table asks for now; ``again``: a press that did not take, repeated."""
        state = status.get("state")
        if status.get("paused"):
            if self._own_card_after_a_cancel(status):
                # the card left the dealer's hand as the supervisor cancelled the round: the
                # pit sets it aside and resumes, as the fault's way out says
                self.view.say("a card drawn as the round was cancelled is set aside; "
                              "the supervisor resumes")
                self._supervisor("resume")
            return  # the view shows why; the dealer waits for the supervisor
        if state == "no_shoe":
            self._press("new_shoe")
            return
        if state == "ready":
            if not again:
                self._sleep_table(PAUSE_BETWEEN_ROUNDS)
                if self.daemon.snapshot().get("state") != "ready":
                    return  # a press that was slow to take came in meanwhile
            self._press("start_round")
            return
        if status.get("next_target") is not None:
            self._deal(status)

    def _own_card_after_a_cancel(self, status: dict[str, Any]) -> bool:
        """Whether the table is paused on the card this dealer drew last, which came out
        with no round open (the round was cancelled between the dealer's look and the draw)."""
        fault = status.get("fault") or {}
        return (fault.get("code") == CARD_NO_ROUND and self._sent is not None
                and self._sent == (status.get("shoe"), int(status.get("cards_drawn") or 0) - 1))

    def _deal(self, status: dict[str, Any]) -> None:
        shoe = int(status["shoe"])
        cards, cut_at = self._cards_for(shoe)
        drawn = int(status["cards_drawn"])
        if self._sent is not None and self._sent[0] == shoe and self._sent[1] >= drawn:
            return  # that card is on its way; the status has not caught up yet
        if drawn >= len(cards):
            raise DemoError("the shoe is empty")
        self._sleep_table(DEAL_SECONDS)
        now = self.daemon.snapshot()  # a supervisor may have paused while the dealer reached
        if now.get("paused") or now.get("cards_drawn") != drawn:
            return
        if (now.get("round"), now.get("next_target")) != (status.get("round"),
                                                          status.get("next_target")):
            return  # the round was cancelled meanwhile: a dealer puts the card back, unread
        fault = self._fault_due(status, drawn)
        if fault is not None:
            self._make_fault(fault, shoe, drawn, cards[drawn])
            return
        if drawn >= cut_at and not status.get("last_round"):
            self.shoe_sim.send_cut_card()
        self.shoe_sim.send_card(cards[drawn])
        self._sent = (shoe, drawn)

    # --- the sandbox's faults (demo_sandbox.py) ------------------------------------------------

    def _note_round(self, status: dict[str, Any]) -> None:
        """Count the rounds seen open: the fault plan goes by them."""
        if status.get("state") not in ("betting", "dealing", "revealing"):
            return
        current = (status.get("shoe"), status.get("round"))
        if current != self._round:
            self._round = current
            self._round_first_drawn = int(status.get("cards_drawn") or 0)
            self.rounds_started += 1

    def _fault_due(self, status: dict[str, Any], drawn: int) -> str | None:
        """The fault to make instead of dealing card ``drawn``, once per planned round."""
        if self._round is None or self._fault_done == self._round:
            return None
        if drawn - self._round_first_drawn != FAULT_AT_CARD:
            return None
        fault = self.faults.for_round(self.rounds_started)
        if fault is not None:
            self._fault_done = self._round
        return fault

    def _supervisor(self, action: str, card: Card | None = None) -> None:
        """A supervisor action, as `pokdeng-table supervisor` takes it, answered."""
        by = Actor("sandbox", os.getuid())
        answer = self.daemon.submit(Supervisor(0.0, action, card, by)).result(30)
        if not answer.get("ok", True):
            self.view.say(f"sandbox: supervisor {action} refused: {answer.get('error')}")

    def _wait_paused(self) -> None:
        version, deadline = -1, time.monotonic() + 30
        while time.monotonic() < deadline and not self.daemon.stopping:
            version, status = self.daemon.wait_for_change(version, 0.2)
            if status.get("paused"):
                return
        raise DemoError("sandbox: the table did not pause on the misread")

    def _make_fault(self, fault: str, shoe: int, drawn: int, card: Card) -> None:
        round_no = self._round[1] if self._round else "?"
        if fault == "misread":
            self.view.say(f"sandbox: round {round_no}: the shoe misreads a card; the "
                          "supervisor enters it")
            self.shoe_sim.send_misread()
            self._sent = (shoe, drawn)  # the card is out of the shoe, unread
            self._wait_paused()
            self._sleep_table(SUPERVISOR_SECONDS)
            self._supervisor("enter_card", card)
        elif fault == "pause":
            self.view.say(f"sandbox: round {round_no}: the supervisor pauses the table")
            self._supervisor("pause")
            self._sleep_table(SUPERVISOR_SECONDS)
            self._supervisor("resume")
        elif fault == "cancel":
            self.view.say(f"sandbox: round {round_no}: the supervisor cancels the round")
            self._supervisor("cancel_round")
        else:  # restart, outage: the daemon stops mid-round; main starts it again
            off = self.faults.outage_seconds if fault == "outage" else 0.0
            self.view.say(f"sandbox: round {round_no}: the table stops mid-round"
                          + (f" and stays off for {off:g} s" if off else "; it restarts"))
            self.restart_after = off
            self.daemon.request_stop()


# --- putting it together -----------------------------------------------------------------------

def main(options: DemoOptions, out: TextIO | None = None) -> int:
    from controller.service.telemetry.logging_setup import setup_logging
    from drivers.sim.shoe import ShoeSimulator

    out = out or sys.stdout
    if options.state_dir:
        state_dir = Path(options.state_dir).resolve()
        state_dir.mkdir(parents=True, exist_ok=True)
    else:
        state_dir = Path(tempfile.mkdtemp(prefix="pokdeng-demo-"))
    state = load_state(state_dir, options.seed)
    events = Path(options.events).resolve() if options.events else state_dir / "events.jsonl"
    shoe_link = state_dir / "shoe.pty"
    if shoe_link.is_symlink() or shoe_link.exists():
        shoe_link.unlink()  # left by a demo that was killed: its pty is gone
    metrics = Path(options.metrics).resolve() if options.metrics else None
    config = demo_config(state_dir, shoe_link, events,
                         display_port(options.display_port) if options.display else None,
                         metrics, options.sandbox, options.sandbox_source)
    # The daemon's structured log goes to a file: the terminal gets the demo's own words
    # (a clock that is not synchronised, a pause: the event lines say them).
    log_path = state_dir / "demo.log"
    log_file = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - open for the whole run
    setup_logging(config.logging.level, config.logging.format, stream=log_file)

    resumed = (state_dir / "journal.sqlite").exists()
    out.write(f"pokdeng-table demo: table {config.table.table_id}, seed {state['seed']}, "
              f"speed x{options.speed:g}{', resuming' if resumed else ''}\n"
              f"  state: {state_dir}  (rerun with --state-dir {state_dir} to carry on)\n"
              f"  events: {events}\n"
              f"  log: {log_path}\n"
              f"  dealer view: pokdeng-table watch --socket {config.control.socket}\n"
              f"  results per 100 staked: a Player bet deducts 200 (stake + the held 100) and "
              f"returns 0-400; a Pair bet returns 1200 on a pair\n")
    out.flush()

    shoe_sim = ShoeSimulator(shoe_link, "beetek", decks=state["decks"], seed=state["seed"])
    shoe_sim.start()
    view = DemoView(out, options.quiet, options.speed)
    view.start()
    dealer: DemoDealer | None = None
    started = time.monotonic()
    while True:
        daemon = Daemon(config, notifier=Notifier({}), clock=TableClock(options.speed))
        daemon.add_event_listener(view.on_events)
        if dealer is None:
            dealer = DemoDealer(daemon, shoe_sim, state["seed"], state["decks"], options.rounds,
                                view, options.faults)
            dealer.stay = options.stay
        else:
            dealer.daemon = daemon  # the same dealer and shoe: the round carries on
        # The daemon's loop owns this (main) thread, for the signals; the dealer plays beside
        # it once the daemon is ready (its drivers exist).
        threading.Thread(target=_start_when_ready, args=(daemon, dealer, view),
                         daemon=True).start()
        status = daemon.run()
        dealer.stop()
        off, dealer.restart_after = dealer.restart_after, None
        if status != 0 or off is None or not _stay_off(off, view):
            break
    shoe_sim.close(drain_timeout=0.5)
    view.close()
    elapsed = time.monotonic() - started
    log_file.close()
    if status != 0:
        # the reason is the log's; a sandbox's integrator looks here first (a fork: exit 65)
        reason = daemon.start_failure or daemon.forked
        print(f"pokdeng-table demo: the daemon stopped with status {status}"
              + (f": {reason}" if reason else "") + f" (its log: {log_path})", file=sys.stderr)
        return status
    if dealer.error:
        print(f"pokdeng-table demo: {dealer.error}", file=sys.stderr)
        return 1
    out.write(f"\n{view.results} round(s) played in {elapsed:.1f} s ({view.events} events this "
              f"run); journal {state_dir / 'journal.sqlite'}, events {events}\n")
    if options.display and not options.stay:
        out.write("the dealer display closed with the demo: `--stay` keeps the table and its "
                  "page up after the last round (Ctrl-C ends it), `--speed 2` plays at a pace "
                  "to follow by eye\n")
    return 0


def _stay_off(seconds: float, view: DemoView) -> bool:
    """The sandbox's restart: the table stays off ``seconds``; False when Ctrl-C or SIGTERM
    came meanwhile (the demo ends)."""
    ended = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: ended.set())
                for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        if seconds:
            view.say(f"sandbox: the table is off for {seconds:g} s")
        ended.wait(seconds)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if not ended.is_set():
        view.say("sandbox: the table starts again from its journal")
    return not ended.is_set()


def _start_when_ready(daemon: Daemon, dealer: DemoDealer, view: DemoView) -> None:
    while not daemon.ready.wait(0.5):
        if daemon.stopping:
            return
    if daemon.display is not None:
        tip = "  (--speed 2 to follow it by eye)" if daemon.clock.speed > 5 else ""
        view.say(f"  dealer display: {daemon.display.url}  "
                 f"scoreboard: {daemon.display.url}scoreboard{tip}")
    dealer.start()
