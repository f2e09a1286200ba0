"""Table inputs and the table-script format (docs/contracts.md "Table scripts").

One input per JSON Lines line; ``at`` is seconds on the table's clock, non-decreasing. Drivers
produce these, the daemon journals them, the table machine consumes them, and ``replay``,
the simulators and the tests read and write them. Pure: no I/O beyond parsing text.

Kinds::

    {"at": 0.0, "kind": "button", "name": "new_shoe"}
    {"at": 1.0, "kind": "card", "card": "7H"}
    {"at": 9.5, "kind": "cut_card"}
    {"at": 10.0, "kind": "misread"}               # optional "code", "reason", "evidence"
    {"at": 11.0, "kind": "switch", "name": "pause", "on": true}
    {"at": 13.0, "kind": "device", "name": "shoe", "connected": false}
    {"at": 14.0, "kind": "supervisor", "action": "enter_card", "card": "9D"}
    {"at": 15.0, "kind": "supervisor", "action": "pause", "by": {"user": "alice", "uid": 1001}}
    {"at": 40.0, "kind": "tick"}
    {"at": 41.0, "kind": "fault", "code": "journal_unwritable", "reason": "disk full"}
    {"at": 42.0, "kind": "clock", "sync": "not_synchronised", "max_error_s": 16.0}
    {"at": 43.0, "kind": "clock", "sync": "synchronised", "step_s": -3600.0}
    {"at": 44.0, "kind": "backend", "name": "http", "reachable": false, "reason": "…404…"}
    {"at": 45.0, "kind": "software", "version": "0.1.0", "digest": "sha256:…",
     "digest_of": "record"}

``fault`` is raised by the controller itself (not a device): something the table cannot work
without failed, so the table pauses with that code and reason until the supervisor resumes.
``backend`` is raised by the controller too: a transport (named as in the config) has failed
to deliver for a while, or delivers again; the table records it and carries on dealing.
``misread`` may carry a fault ``code`` and ``reason`` from the driver (for example an RFID tag
not in the card registry), so the pause says what the shoe actually saw. The ``reason`` is
plain words that name no card, tag or frame; what the shoe actually sent (the frame, a tag id,
a card) goes in ``evidence``, a flat object of strings that the table keeps sealed until the
open round's betting has closed (``fault_detail`` event, docs/faults.md).
``clock`` is the controller's report on the system clock (docs/clock.md): whether the kernel
says it is synchronised (``sync``: synchronised, not_synchronised or unknown), its error bound
``max_error_s``, and ``step_s`` when the wall clock was stepped by that many seconds.
``card`` and ``cut_card`` may carry ``tag``: the RFID tag id the shoe read, journaled so a
restarted daemon still knows which physical cards the open shoe has given (duplicate tags). A
tag is as sealed as its card: it never reaches an event, the status or a log line.
``software`` is journaled by the daemon when it starts with other software than the journal last
recorded (controller/service/trust/software_identity.py): replay takes the version and digest that
``shoe_started`` carries from the journal, never from the code that replays it.
``supervisor`` may carry ``by``, who took the action (the control socket's caller, as the
kernel names it); scripts written before it was added have none and replay as they did.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from controller.rules.cards import Card, CardCodeError, parse_card

BUTTONS = ("new_shoe", "start_round", "reveal", "cancel_round", "end_shoe")
SWITCHES = ("pause",)
DEVICES = ("shoe", "panel")
CLOCK_SYNC_STATES = ("synchronised", "not_synchronised", "unknown")
SUPERVISOR_ACTIONS = ("pause", "resume", "cancel_round", "end_shoe", "enter_card", "reveal",
                      "drain")
MAX_BACKEND_NAME_CHARS = 64
DIGESTS_OF = ("record", "sources")  # the installed files' RECORD, or an editable install's .py
MAX_DETAIL_CHARS = 300  # a line may quote a megabyte of text; its error message does not


class ScriptError(ValueError):
    """A table-script line that is not a valid input; names the line and the fault."""

    def __init__(self, message: str, line_number: int | None = None, source: str | None = None):
        if len(message) > MAX_DETAIL_CHARS:
            message = message[:MAX_DETAIL_CHARS] + "…"
        self.line_number = line_number
        self.source = source
        self.detail = message
        where = ""
        if source is not None and line_number is not None:
            where = f"{source}:{line_number}: "
        elif line_number is not None:
            where = f"line {line_number}: "
        super().__init__(where + message)


@dataclass(frozen=True, slots=True)
class Button:
    at: float
    name: str
    kind = "button"

    def data(self) -> dict[str, Any]:
        return {"name": self.name}


@dataclass(frozen=True, slots=True)
class CardScan:
    at: float
    card: Card
    #: the RFID tag read (journal only, sealed); which physical card it was, not what the table
    #: does with it, so it takes no part in comparing inputs
    tag: str | None = field(default=None, compare=False)
    kind = "card"

    def data(self) -> dict[str, Any]:
        return {"card": self.card.code, **({"tag": self.tag} if self.tag else {})}


@dataclass(frozen=True, slots=True)
class CutCard:
    at: float
    tag: str | None = field(default=None, compare=False)  # as CardScan.tag
    kind = "cut_card"

    def data(self) -> dict[str, Any]:
        return {"tag": self.tag} if self.tag else {}


@dataclass(frozen=True, slots=True)
class Misread:
    at: float
    code: str | None = None
    reason: str | None = None
    #: the sensitive part (raw frame, tag id, card): journaled, shown only once it is not sealed
    evidence: dict[str, str] | None = None
    kind = "misread"

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.code is not None:
            out["code"] = self.code
        if self.reason is not None:
            out["reason"] = self.reason
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out


@dataclass(frozen=True, slots=True)
class Switch:
    at: float
    name: str
    on: bool
    kind = "switch"

    def data(self) -> dict[str, Any]:
        return {"name": self.name, "on": self.on}


@dataclass(frozen=True, slots=True)
class DeviceStatus:
    at: float
    name: str
    connected: bool
    kind = "device"

    def data(self) -> dict[str, Any]:
        return {"name": self.name, "connected": self.connected}


@dataclass(frozen=True, slots=True)
class Actor:
    """Who took a supervisor action: a user name and its uid."""
    user: str
    uid: int

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "uid": self.uid}


@dataclass(frozen=True, slots=True)
class Supervisor:
    at: float
    action: str
    card: Card | None = None
    by: Actor | None = None
    kind = "supervisor"

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action}
        if self.card is not None:
            out["card"] = self.card.code
        if self.by is not None:
            out["by"] = self.by.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class ControllerFault:
    at: float
    code: str
    reason: str
    kind = "fault"

    def data(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ClockReport:
    at: float
    sync: str
    max_error_s: float | None = None
    step_s: float | None = None
    kind = "clock"

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sync": self.sync}
        if self.max_error_s is not None:
            out["max_error_s"] = self.max_error_s
        if self.step_s is not None:
            out["step_s"] = self.step_s
        return out


@dataclass(frozen=True, slots=True)
class BackendStatus:
    at: float
    name: str        # the transport, as named in the config
    reachable: bool
    reason: str      # what failed (an HTTP status, an error), or how it recovered
    kind = "backend"

    def data(self) -> dict[str, Any]:
        return {"name": self.name, "reachable": self.reachable, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Tick:
    at: float
    kind = "tick"

    def data(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True)
class Software:
    """The software the daemon runs (journaled when it changed): version and file digest."""
    at: float
    version: str
    digest: str
    digest_of: str  # "record" or "sources" (DIGESTS_OF)
    kind = "software"

    def data(self) -> dict[str, Any]:
        return {"version": self.version, "digest": self.digest, "digest_of": self.digest_of}


Input = (Button | CardScan | CutCard | Misread | Switch | DeviceStatus | Supervisor
         | ControllerFault | BackendStatus | Tick | ClockReport | Software)


def to_dict(inp: Input) -> dict[str, Any]:
    """The script form of an input: ``{"at": …, "kind": …, …}``."""
    return {"at": inp.at, "kind": inp.kind, **inp.data()}


def to_json(inp: Input) -> str:
    return json.dumps(to_dict(inp), ensure_ascii=False, separators=(", ", ": "))


def with_time(inp: Input, at: float) -> Input:
    """The same input stamped with another clock reading."""
    fields = {name: getattr(inp, name) for name in inp.__dataclass_fields__}
    fields["at"] = at
    return type(inp)(**fields)


# --- parsing -------------------------------------------------------------------------------

_ALLOWED_KEYS = {
    "button": {"name"},
    "card": {"card", "tag"},
    "cut_card": {"tag"},
    "misread": {"code", "reason", "evidence"},
    "switch": {"name", "on"},
    "device": {"name", "connected"},
    "supervisor": {"action", "card", "by"},
    "fault": {"code", "reason"},
    "backend": {"name", "reachable", "reason"},
    "tick": set(),
    "clock": {"sync", "max_error_s", "step_s"},
    "software": {"version", "digest", "digest_of"},
}


def _shown(value: Any) -> str:
    """A script value for a message: a list or object by its kind, anything else as JSON."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return json.dumps(value)


def _require(obj: dict[str, Any], key: str, kind: str) -> Any:
    if key not in obj:
        raise ScriptError(f'"{kind}" input needs "{key}"')
    return obj[key]


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ScriptError(f"unknown {what} {_shown(value)}; expected one of: {', '.join(allowed)}")
    return str(value)


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ScriptError(f'"{key}" must be true or false, got {_shown(value)}')
    return value


def _optional_text(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise ScriptError(f'"{key}" must be a string, got {_shown(value)}')
    return value


def _optional_seconds(obj: dict[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise ScriptError(f'"{key}" must be a number of seconds, got {_shown(value)}')
    return float(value)


def _evidence(obj: dict[str, Any]) -> dict[str, str] | None:
    value = obj.get("evidence")
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
            isinstance(key, str) and isinstance(text, str) for key, text in value.items()):
        raise ScriptError('"evidence" must be an object of strings')
    return dict(value)


def _actor(value: Any) -> Actor | None:
    if value is None:
        return None
    if isinstance(value, dict) and set(value) == {"user", "uid"}:
        user, uid = value["user"], value["uid"]
        if isinstance(user, str) and user and isinstance(uid, int) \
                and not isinstance(uid, bool) and uid >= 0:
            return Actor(user, uid)
    raise ScriptError(f'"by" must be {{"user": name, "uid": number >= 0}}, got {json.dumps(value)}')


def from_dict(obj: Any) -> Input:
    """Build an input from its script form; raise ScriptError saying what is wrong."""
    if not isinstance(obj, dict):
        raise ScriptError(f"expected a JSON object, got {type(obj).__name__}")
    at = obj.get("at")
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise ScriptError(f'"at" must be a number of seconds, got {_shown(at)}')
    try:
        at = float(at)
    except OverflowError:
        at = math.inf
    if not math.isfinite(at) or at < 0:
        raise ScriptError(f'"at" must be a finite number >= 0, got {_shown(obj["at"])}')
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in _ALLOWED_KEYS:
        raise ScriptError(
            f"unknown kind {_shown(kind)}; expected one of: {', '.join(_ALLOWED_KEYS)}"
        )
    extra = set(obj) - {"at", "kind"} - _ALLOWED_KEYS[kind]
    if extra:
        raise ScriptError(f'unknown key(s) for a "{kind}" input: {", ".join(sorted(extra))}')
    try:
        if kind == "button":
            return Button(at, _choice(_require(obj, "name", kind), BUTTONS, "button"))
        if kind == "card":
            return CardScan(at, parse_card(_require(obj, "card", kind)), _optional_text(obj, "tag"))
        if kind == "cut_card":
            return CutCard(at, _optional_text(obj, "tag"))
        if kind == "misread":
            return Misread(at, _optional_text(obj, "code"), _optional_text(obj, "reason"),
                           _evidence(obj))
        if kind == "switch":
            name = _choice(_require(obj, "name", kind), SWITCHES, "switch")
            return Switch(at, name, _bool(_require(obj, "on", kind), "on"))
        if kind == "device":
            name = _choice(_require(obj, "name", kind), DEVICES, "device")
            return DeviceStatus(at, name, _bool(_require(obj, "connected", kind), "connected"))
        if kind == "supervisor":
            action = _choice(_require(obj, "action", kind), SUPERVISOR_ACTIONS, "supervisor action")
            card = None
            if action == "enter_card":
                card = parse_card(_require(obj, "card", kind))
            elif "card" in obj:
                raise ScriptError(f'"card" only goes with "enter_card", not "{action}"')
            return Supervisor(at, action, card, _actor(obj.get("by")))
        if kind == "fault":
            code = _optional_text(obj, "code")
            reason = _optional_text(obj, "reason")
            if not code or reason is None:
                raise ScriptError('"fault" input needs a "code" and a "reason"')
            return ControllerFault(at, code, reason)
        if kind == "clock":
            sync = _choice(_require(obj, "sync", kind), CLOCK_SYNC_STATES, "clock sync state")
            return ClockReport(at, sync, _optional_seconds(obj, "max_error_s"),
                               _optional_seconds(obj, "step_s"))
        if kind == "backend":
            name = _require(obj, "name", kind)
            if not isinstance(name, str) or not 0 < len(name) <= MAX_BACKEND_NAME_CHARS:
                raise ScriptError(f'"name" must be a transport name of 1-'
                                  f'{MAX_BACKEND_NAME_CHARS} characters, got {_shown(name)}')
            reason = _optional_text(obj, "reason")
            return BackendStatus(at, name, _bool(_require(obj, "reachable", kind), "reachable"),
                                 reason or "")
        if kind == "software":
            version = _optional_text(obj, "version")
            digest = _optional_text(obj, "digest")
            if not version or not digest:
                raise ScriptError('"software" input needs a "version" and a "digest"')
            return Software(at, version, digest,
                            _choice(_require(obj, "digest_of", kind), DIGESTS_OF, "digest_of"))
        return Tick(at)
    except CardCodeError as exc:
        raise ScriptError(str(exc)) from None


def parse_line(text: str, line_number: int | None = None, source: str | None = None) -> Input:
    """Parse one script line (JSON object).

    A line read with ``errors="surrogateescape"`` (replay does) holds its undecodable bytes as
    lone surrogates: such a line is not UTF-8 and is refused by its column.
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ScriptError(f"not UTF-8 text at column {exc.start + 1}", line_number,
                              source) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScriptError(f"not valid JSON: {exc.msg} at column {exc.colno}", line_number,
                          source) from None
    except ValueError:  # an integer of more digits than Python converts
        raise ScriptError("not usable JSON: a number too long to read", line_number,
                          source) from None
    except RecursionError:
        raise ScriptError("not usable JSON: nested too deeply", line_number, source) from None
    try:
        return from_dict(obj)
    except ScriptError as exc:
        raise ScriptError(exc.detail, line_number, source) from None


def read_script(lines: Iterable[str], source: str | None = None) -> Iterator[Input]:
    """Yield the inputs of a script; blank lines and ``#`` comments are skipped.

    Raises ScriptError naming the line on the first malformed line or a clock going backwards;
    inputs before it have already been yielded (nothing accepted is lost).
    """
    previous_at = 0.0
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        inp = parse_line(stripped, number, source)
        if inp.at < previous_at:
            raise ScriptError(
                f'"at" goes backwards: {inp.at} after {previous_at}', number, source
            )
        previous_at = inp.at
        yield inp


def write_script(inputs: Iterable[Input], out: TextIO) -> None:
    for inp in inputs:
        out.write(to_json(inp) + "\n")
