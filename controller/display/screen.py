"""What the screens show, as JSON for the page: built from published events and the status view.

``Screen`` keeps the little the status does not hold: the last round results, the shoe's
roadmap and the length of the betting window (all from published events, which the machine
has sealed: ``round_result`` comes after betting closed). ``view(status)`` turns the sealed
status into the dealer screen's words: the state, the next step and where the next card goes,
the countdown, the pause banner with its way out, and the health of the devices.

Nothing here sees an input, so nothing here can show a card of a round whose betting is open.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any

from controller.display import words
from controller.display.roadmap_svg import COLOURS, render_svg
from controller.rules.hands import HAND_ORDER
from controller.table.faults import FAULTS
from controller.table.procedure import ROUND_TARGETS, STATE_WORDS
from controller.table.roadmap import Roadmap, RoadmapError
from controller.table.views import seconds_left_now

RESULTS_KEPT = 8               # round results the scoreboard lists
DEFAULT_BETTING_SECONDS = 15.0  # until a round_opened says how long the window is

STATE_TITLES = {
    "starting": "Starting",
    "stopped": "Table stopped",
    "no_shoe": "No shoe",
    "awaiting_flip": "New shoe",
    "burning": "Burning",
    "ready": "Ready",
    "betting": "Betting open",
    "dealing": "Betting closed",
    "revealing": "Revealing",
}

#: who paused, when the pause was no person's action
PAUSED_BY_CODE = {"switch_pause": "by.key", "journal_unwritable": "by.storage"}
UNKNOWN_WAY_OUT = "Call the supervisor (docs/faults.md lists every fault and its way out)."


def next_step(status: Mapping[str, Any], lang: str = "en") -> str:
    """The dealer's next step in plain words, as ``watch`` says it, with the card's place in
    the round ("deal card 7 of 12: Player 2, second card"): ``words.step``, the one source."""
    return words.step_words(lang, status)


def paused_by(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """Who or what paused the table, as words' key and arguments: the supervisor (the role,
    never a login: a screen can be on camera; the journal keeps who), the key switch, or the
    table itself for a fault."""
    fault = status.get("fault") or {}
    code = fault.get("code") if isinstance(fault, Mapping) else None
    if code == "supervisor_pause":
        return {"key": "by.a_supervisor", "args": {}}
    if code in PAUSED_BY_CODE:
        return {"key": PAUSED_BY_CODE[str(code)], "args": {}}
    return {"key": "by.fault", "args": {}} if code else None


def banner(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pause or fault the supervisor must not miss: code, what happened in plain words,
    the way out, who paused (``fault``: the words' key of the code, docs/faults.md)."""
    if not (status.get("paused") or status.get("storage_fault")):
        return None
    fault = status.get("fault") if isinstance(status.get("fault"), Mapping) else {}
    assert isinstance(fault, Mapping)
    code = str(fault.get("code") or ("journal_unwritable" if status.get("storage_fault")
                                     else "paused"))
    rule = FAULTS.get(code)
    detail = fault.get("detail") if isinstance(fault.get("detail"), Mapping) else None
    known = words.fault_key(status)
    by = paused_by(status)
    return {
        "code": code,
        "fault": known,
        "reason": str(fault.get("reason") or status.get("storage_fault") or "paused"),
        "what": words.say("en", f"fault.{known}"),
        "detail_code": detail.get("code") if detail else None,
        # faults.py writes Markdown for docs/faults.md; a screen shows plain words
        "way_out": (rule.way_out if rule else UNKNOWN_WAY_OUT).replace("`", ""),
        "by": words.words_of("en", by) if by else None,
        "by_words": by,
        "held_inputs": status.get("held_inputs") or 0,
    }


#: the clock row's words by the kernel's synchronisation state (docs/clock.md)
CLOCK_WORDS = {"synchronised": "health.synced", "not_synchronised": "health.not_synced",
               "unknown": "health.unknown"}
#: a transport's state as the devices box says it (docs/backend.md)
BACKEND_STATES = {"retrying": "health.retrying", "refused": "health.refused",
                  "no subscriber": "health.no_subscriber", "no_subscriber": "health.no_subscriber",
                  "disconnected": "health.disconnected",
                  # its events wait until the backend has said where it stands: not started
                  "waiting for the backend to say where it stands": "health.starting"}
#: backlog from which a transport that still delivers is shown as falling behind
BACKLOG_WARNING = 50


def row(part: str, ok: bool, key: str, name: str | None = None,
        **args: object) -> dict[str, Any]:
    """One line of the devices box: the part in plain words and its state, in English
    (``label``, ``text``) and as the words' keys the pages translate (``part``, ``key``,
    ``args``; ``name`` names a backend)."""
    label = words.say("en", f"part.{part}", name=name or part)
    text = words.say("en", key, **args)
    backlog = args.pop("backlog", 0)
    if backlog:  # a transport in trouble still says what it has to send
        text += " · " + words.say("en", "health.to_send", n=backlog)
    return {"name": name or part, "part": part, "ok": ok, "label": label, "text": text,
            "key": key, "args": args, "backlog": backlog}


def backend_row(name: str, backend: Any, unreachable: Mapping[str, Any]) -> dict[str, Any]:
    """A transport's line: up to date, what it still has to send, or why it cannot."""
    if not isinstance(backend, Mapping) or "error" in backend:
        return row("backend", False, "health.no_status", name)
    backlog = int(backend.get("backlog") or 0)
    state = str(backend.get("state") or "?")
    if name in unreachable:  # failing past its unreachable_after_s (docs/backend.md)
        return row("backend", False, "health.unreachable", name, backlog=backlog)
    if state not in ("ok", "starting"):  # retrying, refused, no subscriber, disconnected
        return row("backend", False, BACKEND_STATES.get(state, "health.disconnected"), name,
                   backlog=backlog)
    if backlog:
        return row("backend", backlog < BACKLOG_WARNING, "health.to_send", name, n=backlog)
    return row("backend", True, "health.up_to_date", name)


def journal_row(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The journal's line: writable, and what the full check after start-up found."""
    journal = status.get("journal")
    if journal is None:
        return None
    if journal != "ok":
        return row("journal", False, "health.cannot_write")
    check = status.get("journal_check")
    if isinstance(check, Mapping) and check.get("state") == "failed":
        return row("journal", False, "health.check_failed")
    return row("journal", True, "health.ok")


def health(status: Mapping[str, Any], backends: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One line per part of the table: ok (True/False) and its words."""
    devices = status.get("devices") or {}
    rows = []
    for device in ("shoe", "panel"):
        if device in devices:
            up = bool(devices[device])
            rows.append(row(device, up, "health.connected" if up else "health.not_connected"))
    switch = status.get("switch")
    if switch is not None:
        rows.append(row("key", switch == "run",
                        "health.run" if switch == "run" else "health.pause"))
    unreachable = status.get("backends_unreachable") or {}
    for name, backend in sorted((backends or {}).items()):
        rows.append(backend_row(name, backend, unreachable))
    journal = journal_row(status)
    if journal is not None:
        rows.append(journal)
    sync = status.get("clock_sync")
    if sync is not None:  # an unsynchronised clock puts wrong times on every event
        rows.append(row("clock", sync == "synchronised",
                        CLOCK_WORDS.get(str(sync), "health.unknown")))
    return rows


class Screen:
    """The screens' memory of published events, and the view of a status. One thread uses it."""

    def __init__(self, zone: tzinfo | None = None) -> None:
        #: the zone of the table's day in the game ids (``display.studio.timezone``); None:
        #: the system's local zone
        self.zone = zone
        self.roadmap: Roadmap = Roadmap()
        self.results: deque[dict[str, Any]] = deque(maxlen=RESULTS_KEPT)
        self.cancelled: list[int] = []               # this shoe's cancelled rounds
        #: the last cancelled round: told to players until the next round's result, so a
        #: player who bet on it sees it was refunded (``opened_since``: a round opened after)
        self.cancelled_round: int | None = None
        self.opened_since = False
        #: the table clock when the newest result came, while it is a settled round's (None
        #: after a cancel or a new shoe): the shoe's last result is held on the players' stage
        self.settled_at: float | None = None
        self.table: str | None = None
        self.opened_on: dict[tuple[Any, Any], str] = {}  # (shoe, round): its date, YYYYMMDD
        self.betting_seconds: float = DEFAULT_BETTING_SECONDS
        self.last_seq: int = 0
        self.problems: list[str] = []  # events the roadmap refused (kept for the log)

    def apply(self, event: Mapping[str, Any]) -> set[str]:
        """Take one published event (in seq order; older or repeated ones change nothing);
        return what changed: "results", "roadmap"."""
        seq = event.get("seq")
        if not isinstance(seq, int) or seq <= self.last_seq:
            return set()
        self.last_seq = seq
        kind = event.get("type")
        changed: set[str] = set()
        if isinstance(event.get("table"), str):
            self.table = event["table"]
        if kind == "round_opened":
            seconds = (event.get("data") or {}).get("betting_seconds")
            if isinstance(seconds, (int, float)) and seconds > 0:
                self.betting_seconds = float(seconds)
            self.opened_on[(event.get("shoe"), event.get("round"))] = _date(event.get("time"),
                                                                        self.zone)
            self.opened_since = True
        elif kind == "shoe_started":
            self.results.clear()
            self.cancelled.clear()
            self.opened_on.clear()
            self.cancelled_round = self.settled_at = None
            changed |= {"results", "roadmap", "status"}
        elif kind == "round_result":
            self.cancelled_round = None
            self.settled_at = _clock(event.get("time"))
            changed.add("status")
            self.results.appendleft(dict(result_summary(event),
                                         game=self.game_id(event.get("shoe"), event.get("round"))))
            changed.add("results")
        elif kind == "round_cancelled" and isinstance(event.get("round"), int):
            # it keeps its place in the last results and in the shoe's round count
            self.cancelled.append(event["round"])
            self.cancelled_round, self.opened_since = event["round"], False
            self.settled_at = None
            self.results.appendleft(cancelled_summary(
                event, self.game_id(event.get("shoe"), event.get("round"))))
            changed |= {"results", "roadmap", "status"}
        if kind in ("shoe_started", "round_result"):
            try:
                if self.roadmap.add(event):
                    changed.add("roadmap")
            except RoadmapError as exc:
                self.problems.append(str(exc))
        return changed

    def roadmap_message(self) -> dict[str, Any]:
        board = self.roadmap.to_json()
        counts = {position: plate["counts"] for position, plate in board["positions"].items()}
        beads = {position: plate["beads"] for position, plate in board["positions"].items()}
        return {"shoe": board["shoe"], "rounds": board["rounds"], "counts": counts,
                "beads": beads, "colours": dict(COLOURS), "svg": render_svg(self.roadmap),
                "cancelled": list(self.cancelled)}

    def game_id(self, shoe: object, round_: object) -> str | None:
        """The id players quote in a dispute: table, shoe, round and the day the round opened
        (``T1-3-12-20261202``); no round open: the last result's."""
        if round_ is None and self.results:
            shoe, round_ = self.results[0]["shoe"], self.results[0]["round"]
        if self.table is None or shoe is None or round_ is None:
            return None
        day = self.opened_on.get((shoe, round_))
        return f"{self.table}-{shoe}-{round_}" + (f"-{day}" if day else "")

    def results_message(self) -> list[dict[str, Any]]:
        return list(self.results)

    def view(self, status: Mapping[str, Any], backends: Mapping[str, Any] | None = None,
             rate: float = 1.0) -> dict[str, Any]:
        """The dealer screen of a sealed status (``rate``: real seconds per table second)."""
        now = status.get("now")
        left = None
        if isinstance(now, (int, float)) and not isinstance(now, bool):
            left = seconds_left_now(dict(status), float(now))
        state = str(status.get("state") or "starting")
        title = STATE_TITLES.get(state, state)
        if status.get("paused"):
            title = "PAUSED"
        step = words.step(status)
        return {
            "table": status.get("table"),
            "state": state,
            "title": title,
            "words": STATE_WORDS.get(state, ""),
            "step": words.words_of("en", step),
            "step_words": step,
            "target": status.get("next_target"),
            "cards_dealt": status.get("cards_dealt") or 0,
            "shoe": status.get("shoe"),
            "round": status.get("round"),
            "rounds_played": status.get("rounds_played"),
            "cards_left": status.get("cards_left"),
            "cards_drawn": status.get("cards_drawn"),
            "last_round": bool(status.get("last_round")),
            "betting": {"open": bool(status.get("betting_open")), "seconds_left": left,
                        "seconds": self.betting_seconds, "frozen": bool(status.get("paused")),
                        "rate": rate},
            # The status gives the hands only once betting closed (views.status).
            "hands": dict(status.get("hands") or {}) if not status.get("betting_open") else {},
            "banner": banner(status),
            "health": health(status, backends),
        }


def result_summary(event: Mapping[str, Any]) -> dict[str, Any]:
    """A round_result as the screens draw it: each hand with its outcome, and the Pair wins."""
    data = event.get("data") or {}
    hands = data.get("hands") or {}
    positions = data.get("positions") or {}
    seats = []
    for seat in HAND_ORDER:
        hand = dict(hands.get(seat) or {})
        result = positions.get(seat) or {}
        hand.update(seat=seat, outcome=result.get("outcome"), odds=result.get("odds"),
                    pair_won=bool(result.get("pair")))
        seats.append(hand)
    return {"shoe": event.get("shoe"), "round": event.get("round"),
            "last_round": bool(data.get("last_round")), "seats": seats,
            "pairs_won": [s["seat"] for s in seats if s["pair_won"]]}


def cancelled_summary(event: Mapping[str, Any], game: str | None) -> dict[str, Any]:
    """A cancelled round as the last results show it: its place, no hands (all bets refunded)."""
    return {"shoe": event.get("shoe"), "round": event.get("round"), "cancelled": True,
            "last_round": False, "seats": [], "pairs_won": [], "game": game}


def _moment(time: object) -> datetime | None:
    """An event's ISO-8601 UTC time (a bare one taken as UTC, as the events' are), or None."""
    if not isinstance(time, str):
        return None
    try:
        moment = datetime.fromisoformat(time)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _clock(time: object) -> float | None:
    """An event's time as the table clock reads it (seconds since the epoch), or None."""
    moment = _moment(time)
    return moment.timestamp() if moment is not None else None


def _date(time: object, zone: tzinfo | None) -> str:
    """An event's ISO-8601 UTC time as the day it is in ``zone`` (None: the system's local
    zone): ``2026-12-01T23:30:00.000Z`` in Asia/Manila -> ``20261202``. A studio's players
    quote the day on their own calendar, not London's."""
    moment = _moment(time)
    return moment.astimezone(zone).strftime("%Y%m%d") if moment is not None else ""


def target_order() -> list[str]:
    """The seats in the order the cards of a round go (for the page's layout)."""
    return list(dict.fromkeys(ROUND_TARGETS))
