"""RFID shoe: the reader reports the UID of each tagged card that passes, one per line.

A line is the UID in hex (4, 7 or 10 bytes: 8, 14 or 20 hex digits), optionally with ``:``,
``-`` or space between bytes, ended by CR, LF or CRLF; an STX byte (0x02) some readers send
first is ignored. A card registry maps each UID to a card code, or to ``CUT`` for the cut card.

Faults, each a ``Misread`` so the table pauses rather than guesses:
- ``rfid_unknown_uid``: a UID not in the registry;
- ``rfid_duplicate_uid``: a UID seen before in this shoe — a physical card came back. The
  driver's ``new_shoe()`` (called by the daemon when the table starts a shoe) forgets the UIDs.

A tag id maps to a card through the registry on this same PC, so it is as sealed as the card:
it goes in the misread's ``evidence`` (with the card, for a duplicate), never in its words.

Readers that report a tag more than once while it passes the antenna: set
``repeat_window_seconds`` (default 0, off) and the same UID again, right after itself, within
that many seconds is one read (logged), not a duplicate card.

Registry file: CSV ``uid,card``; a header row ``uid,card`` is allowed, ``#`` starts a comment
line. Example: ``config/cards.example.csv``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from controller.rules.cards import Card, CardCodeError, new_shoe_cards, parse_card
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.protocols.base import LineShoeParser, Output, Problem, ProtocolConfigError, size_of

CUT = "CUT"
UID_HEX_LENGTHS = (8, 14, 20)
_HEX = frozenset("0123456789ABCDEF")

Registry = dict[str, "Card | str"]  # UID (upper-case hex, no separators) -> Card or CUT


def normalize_uid(text: str) -> str | None:
    """Canonical UID (upper-case hex, no separators) or None when it is not a UID."""
    uid = text.strip().replace(":", "").replace("-", "").replace(" ", "").upper()
    if len(uid) in UID_HEX_LENGTHS and set(uid) <= _HEX:
        return uid
    return None


def parse_registry(lines: Iterable[str], source: str = "registry") -> Registry:
    """Read ``uid,card`` rows; raise ProtocolConfigError naming the file and line."""
    registry: Registry = {}
    cut_seen_at: int | None = None
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or not "".join(row).strip() or row[0].strip().startswith("#"):
            continue
        where = f"{source}:{number}"
        if len(row) != 2:
            raise ProtocolConfigError(f"{where}: expected 'uid,card', got {len(row)} field(s)")
        uid_text, card_text = row[0].strip(), row[1].strip()
        if not registry and cut_seen_at is None and uid_text.lower() == "uid":
            continue  # header (the first row that is not a comment)
        uid = normalize_uid(uid_text)
        if uid is None:
            raise ProtocolConfigError(
                f"{where}: {uid_text!r} is not a UID (8, 14 or 20 hex digits)")
        if uid in registry:
            raise ProtocolConfigError(f"{where}: UID {uid} is listed twice")
        if card_text.upper() == CUT:
            if cut_seen_at is not None:
                raise ProtocolConfigError(
                    f"{where}: a second CUT entry (the first is on line {cut_seen_at})")
            cut_seen_at = number
            registry[uid] = CUT
            continue
        try:
            registry[uid] = parse_card(card_text)
        except CardCodeError as exc:
            raise ProtocolConfigError(f"{where}: {exc}") from None
    if not registry:
        raise ProtocolConfigError(f"{source}: no cards in the registry")
    return registry


def load_registry(path: str | Path) -> Registry:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProtocolConfigError(f"rfid registry {path}: {exc.strerror or exc}") from None
    return parse_registry(io.StringIO(text), str(path))


def write_registry(registry: Registry, path: str | Path) -> None:
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write("uid,card\n")
        for uid, card in registry.items():
            out.write(f"{uid},{card if isinstance(card, str) else card.code}\n")


def simulated_uid(index: int) -> str:
    """UID of physical card ``index`` in a simulated shoe (7 bytes, NXP-style prefix 04)."""
    return f"0450{index:010X}"


SIMULATED_CUT_UID = "04CC0000000C07"


def simulated_registry(decks: int = 8) -> Registry:
    """Deterministic registry for the simulator: one UID per physical card, plus the cut card."""
    registry: Registry = {simulated_uid(i): card for i, card in enumerate(new_shoe_cards(decks))}
    registry[SIMULATED_CUT_UID] = CUT
    return registry


class RfidParser(LineShoeParser):
    name = "rfid"
    default_baudrate = 9600
    max_frame = 64
    frame_start = b"\x02"
    too_long_message = "over-long rfid line"
    noise_message = "bytes before a frame start"

    def __init__(self, registry: Registry, repeat_window_seconds: float = 0.0):
        super().__init__()
        if not registry:
            raise ProtocolConfigError("rfid: the card registry is empty")
        if isinstance(repeat_window_seconds, bool) or not isinstance(
                repeat_window_seconds, (int, float)) or not 0 <= repeat_window_seconds <= 5:
            raise ProtocolConfigError(f"rfid repeat_window_seconds: expected 0 to 5 seconds, "
                                      f"got {repeat_window_seconds!r}")
        self.registry = dict(registry)
        self.repeat_window_seconds = float(repeat_window_seconds)
        self._seen: set[str] = set()
        self._last: tuple[str, float] | None = None  # the previous tag and when it was read

    def new_shoe(self) -> None:
        self._seen.clear()
        self._last = None

    def _line(self, raw: bytes, at: float) -> list[Output]:
        uid = normalize_uid(raw.lstrip(b"\x02").decode("ascii", "replace"))
        if uid is None:
            return [Problem("bad_line", f"not a tag UID {size_of(raw)}", raw)]
        return [self._tag(uid, at)]

    def _tag(self, uid: str, at: float) -> Output:
        previous, self._last = self._last, (uid, at)
        if (self.repeat_window_seconds and previous is not None and previous[0] == uid
                and 0 <= at - previous[1] <= self.repeat_window_seconds):
            # some readers report a tag again while it is still in the field: one card
            return Problem("repeat", f"a tag reported again within "
                                     f"{self.repeat_window_seconds:g} s; taken for one read",
                           uid.encode("ascii"), level="info")
        entry = self.registry.get(uid)
        if entry is None:
            return Misread(at, "rfid_unknown_uid", "a tag that is not in the card registry",
                           {"tag": uid})
        if uid in self._seen:
            card = CUT if entry == CUT else entry.code
            return Misread(at, "rfid_duplicate_uid", "a tag already read in this shoe came again",
                           {"tag": uid, "card": card})
        self._seen.add(uid)
        return CutCard(at) if entry == CUT else CardScan(at, entry)


class RfidEncoder:
    """Lines as an RFID reader sends them (for the simulator and tests)."""

    UNKNOWN_UID = "04EE0000000BAD"

    def tag(self, uid: str) -> bytes:
        return f"{uid}\r\n".encode("ascii")

    def misread(self) -> bytes:
        """An RFID reader has no "not read" message; a tag outside the registry stands in."""
        return self.tag(self.UNKNOWN_UID)

    def corrupt(self, frame: bytes) -> bytes:
        """A damaged line that cannot be taken for a UID."""
        return frame[:4] + b"\xa7Z" + frame[6:]
