"""RFID shoe: the reader reports the UID of each tagged card that passes.

Two framings (driver option ``framing``):

``line`` (default): one UID per line, in hex (4, 5, 6, 7 or 10 bytes: 8, 10, 12, 14 or 20 hex
digits), optionally with ``:``, ``-`` or space between bytes, ended by CR, LF or CRLF; an STX
byte (0x02) some readers send first is ignored.

``stx_etx``: the frames of 125 kHz reader modules (ID-12/ID-20LA, RDM630/RDM6300 style)::

    STX (0x02)  10 or 12 hex digits of tag data  [2 hex digits of checksum]  [CR LF]  ETX (0x03)

The checksum, where the frame has one, is the XOR of the data bytes; it is checked, and a frame
that fails it is a problem (logged and counted), never a card. Option ``checksum``: ``auto``
(default: 10 digits = data alone; 12 = 10 data + checksum; 14 = 12 data + checksum), ``xor``
(every frame carries one: 12 or 14 digits) or ``none`` (never: 10 or 12 digits of data).
Bytes between frames other than white space are garbage.

A card registry maps each UID to a card code, or to ``CUT`` for the cut card.

Faults, each a ``Misread`` so the table pauses rather than guesses:
- ``rfid_unknown_uid``: a UID not in the registry;
- ``rfid_duplicate_uid``: a UID seen before in this shoe — a physical card came back. The
  driver's ``new_shoe()`` (called by the daemon when the table starts a shoe) forgets the UIDs;
  ``restore_seen(tags)`` gives them back after a restart in the middle of a shoe.

A tag id maps to a card through the registry on this same PC, so it is as sealed as the card:
it goes in the misread's ``evidence`` (with the card, for a duplicate), never in its words.
An accepted read carries its tag id in the input (``tag``) for the journal only.

Readers that report a tag again and again while it stays on the antenna (many 125 kHz modules
send the frame once or twice a second): set ``repeat_window_seconds`` (default 0, off). The same
UID again, right after itself, within that many seconds of its previous report is the same read:
dropped quietly (counted as ``repeat``, logged at DEBUG). The window runs from the latest report,
so a card left on the antenna stays one read; the same tag after a gap longer than the window is
a card coming back: ``rfid_duplicate_uid``.

Registry file: CSV ``uid,card``; a header row ``uid,card`` is allowed, ``#`` starts a comment
line. Cards in any spelling of vendors' tag tables (``controller.rules.cards.parse_lenient_card``:
``AS``, ``as``, ``1s``, ``10h``, ``ace of spades``, ``10 of hearts``, ``Q♥``); the cut card is
``CUT`` (or ``cut card``); a joker or anything else stops the load naming file and line.
Example: ``config/cards.example.csv``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from functools import reduce
from pathlib import Path

from controller.rules.cards import Card, CardCodeError, new_shoe_cards, parse_lenient_card
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.protocols.base import (
    FrameSplitter,
    LineShoeParser,
    Output,
    Problem,
    ProtocolConfigError,
    size_of,
)

CUT = "CUT"
#: how tag tables name the cut card (compared in lower case, "-" and runs of spaces as one)
CUT_SPELLINGS = frozenset({"cut", "cut card", "cutcard"})
UID_HEX_LENGTHS = (8, 10, 12, 14, 20)
FRAMINGS = ("line", "stx_etx")
CHECKSUMS = ("auto", "xor", "none")
STX, ETX = 0x02, 0x03
#: hex digits between STX and ETX (line end taken off) each checksum mode takes, and how many
#: of them are the checksum
_FRAMED_LENGTHS = {
    "auto": {10: 0, 12: 2, 14: 2},
    "xor": {12: 2, 14: 2},
    "none": {10: 0, 12: 0},
}
_HEX = frozenset("0123456789ABCDEF")
_HEX_BYTES = frozenset(b"0123456789ABCDEFabcdef")
_WHITESPACE = frozenset(b" \t\r\n\x00")

Registry = dict[str, "Card | str"]  # UID (upper-case hex, no separators) -> Card or CUT


def normalize_uid(text: str) -> str | None:
    """Canonical UID (upper-case hex, no separators) or None when it is not a UID."""
    uid = text.strip().replace(":", "").replace("-", "").replace(" ", "").upper()
    if len(uid) in UID_HEX_LENGTHS and set(uid) <= _HEX:
        return uid
    return None


def xor_checksum(data_hex: str) -> int:
    """The checksum of a 125 kHz reader frame: the XOR of its data bytes."""
    return reduce(lambda acc, byte: acc ^ byte, bytes.fromhex(data_hex), 0)


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
        if " ".join(card_text.lower().replace("-", " ").split()) in CUT_SPELLINGS:
            if cut_seen_at is not None:
                raise ProtocolConfigError(
                    f"{where}: a second CUT entry (the first is on line {cut_seen_at})")
            cut_seen_at = number
            registry[uid] = CUT
            continue
        try:
            registry[uid] = parse_lenient_card(card_text)
        except CardCodeError as exc:
            raise ProtocolConfigError(f"{where}: {exc}") from None
    if not registry:
        raise ProtocolConfigError(f"{source}: no cards in the registry")
    return registry


def load_registry(path: str | Path) -> Registry:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # spreadsheets write a BOM
    except OSError as exc:
        raise ProtocolConfigError(f"rfid registry {path}: {exc.strerror or exc}") from None
    return parse_registry(io.StringIO(text), str(path))


def write_registry(registry: Registry, path: str | Path) -> None:
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write("uid,card\n")
        for uid, card in registry.items():
            out.write(f"{uid},{card if isinstance(card, str) else card.code}\n")


def simulated_uid(index: int, framing: str = "line") -> str:
    """UID of physical card ``index`` in a simulated shoe: 7 bytes with the NXP-style prefix
    04 for a line reader; 5 bytes (an EM4100 125 kHz tag) for a framed ``stx_etx`` reader."""
    if framing == "stx_etx":
        return f"5A{index:08X}"
    return f"0450{index:010X}"


SIMULATED_CUT_UID = "04CC0000000C07"
SIMULATED_CUT_UID_FRAMED = "5ACC00C007"


def simulated_cut_uid(framing: str = "line") -> str:
    return SIMULATED_CUT_UID_FRAMED if framing == "stx_etx" else SIMULATED_CUT_UID


def simulated_registry(decks: int = 8, framing: str = "line") -> Registry:
    """Deterministic registry for the simulator: one UID per physical card, plus the cut card."""
    registry: Registry = {simulated_uid(i, framing): card
                          for i, card in enumerate(new_shoe_cards(decks))}
    registry[simulated_cut_uid(framing)] = CUT
    return registry


class StxEtxBuffer:
    """Splits a byte stream into STX … ETX frames, capped in length (the framed readers).

    Same answers as ``LineBuffer.push``: ``("line", body)`` for each complete frame (what was
    between STX and ETX) and ``("garbage" | "frame_too_long", bytes)`` for each discarded run:
    bytes outside a frame other than white space, or a frame cut short by the next STX.
    """

    def __init__(self, max_frame: int):
        self.max_frame = max_frame
        self._buffer = bytearray()     # inside a frame: what came after STX
        self._garbage = bytearray()    # outside a frame: bytes that belong to none
        self._inside = False
        self._overflowed = False

    def push(self, data: bytes) -> list[tuple[str, bytes]]:
        found: list[tuple[str, bytes]] = []
        for byte in data:
            if byte == STX:  # always starts a frame: whatever was unfinished is lost
                self._flush_garbage(found)
                if self._inside:
                    found.append(("frame_too_long" if self._overflowed else "garbage",
                                  b"\x02" + bytes(self._buffer)))
                self._start(inside=True)
            elif not self._inside:
                if byte in _WHITESPACE:
                    self._flush_garbage(found)
                else:
                    self._garbage.append(byte)
                    if len(self._garbage) >= self.max_frame:
                        self._flush_garbage(found)
            elif byte == ETX:
                found.append(("frame_too_long" if self._overflowed else "line",
                              bytes(self._buffer)))
                self._start(inside=False)
            elif len(self._buffer) >= self.max_frame:
                self._overflowed = True  # keep the first max_frame bytes as evidence
            else:
                self._buffer.append(byte)
        return found

    def _start(self, inside: bool) -> None:
        self._buffer.clear()
        self._inside = inside
        self._overflowed = False

    def _flush_garbage(self, found: list[tuple[str, bytes]]) -> None:
        if self._garbage:
            found.append(("garbage", bytes(self._garbage)))
            self._garbage.clear()

    def discard(self) -> bytes:
        pending = bytes(self._garbage) + (b"\x02" + bytes(self._buffer) if self._inside else b"")
        self._garbage.clear()
        self._start(inside=False)
        return pending


class RfidParser(LineShoeParser):
    name = "rfid"
    default_baudrate = 9600
    max_frame = 64
    frame_start = b"\x02"
    too_long_message = "over-long rfid line"
    noise_message = "bytes before a frame start"

    def __init__(self, registry: Registry, repeat_window_seconds: float = 0.0,
                 framing: str = "line", checksum: str = "auto"):
        self.framing = framing  # before the base builds the splitter, which depends on it
        super().__init__()
        if not registry:
            raise ProtocolConfigError("rfid: the card registry is empty")
        if isinstance(repeat_window_seconds, bool) or not isinstance(
                repeat_window_seconds, (int, float)) or not 0 <= repeat_window_seconds <= 5:
            raise ProtocolConfigError(f"rfid repeat_window_seconds: expected 0 to 5 seconds, "
                                      f"got {repeat_window_seconds!r}")
        if framing not in FRAMINGS:
            raise ProtocolConfigError(f"rfid framing: expected one of {', '.join(FRAMINGS)}, "
                                      f"got {framing!r}")
        if checksum not in CHECKSUMS:
            raise ProtocolConfigError(f"rfid checksum: expected one of {', '.join(CHECKSUMS)}, "
                                      f"got {checksum!r}")
        if framing == "line" and checksum != "auto":
            raise ProtocolConfigError("rfid checksum: only framed readers (framing: stx_etx) "
                                      "send one")
        self.registry = dict(registry)
        self.repeat_window_seconds = float(repeat_window_seconds)
        self.checksum = checksum
        if framing == "stx_etx":
            self.too_long_message = "over-long rfid frame"
            self.noise_message = "bytes outside an STX/ETX frame"
        self._seen: set[str] = set()
        self._last: tuple[str, float] | None = None  # the previous tag and when it was read

    def _splitter(self) -> FrameSplitter:
        if self.framing == "stx_etx":
            return StxEtxBuffer(self.max_frame)
        return super()._splitter()

    def new_shoe(self) -> None:
        self._seen.clear()
        self._last = None

    def restore_seen(self, tags: Iterable[str]) -> None:
        """The tags already read in the open shoe (from the journal, after a restart)."""
        self._seen.update(tag for tag in tags if isinstance(tag, str))

    def _line(self, raw: bytes, at: float) -> list[Output]:
        if self.framing == "stx_etx":
            return [self._framed(raw, at)]
        uid = normalize_uid(raw.lstrip(b"\x02").decode("ascii", "replace"))
        if uid is None:
            return [Problem("bad_line", f"not a tag UID {size_of(raw)}", raw)]
        return [self._tag(uid, at)]

    def _framed(self, raw: bytes, at: float) -> Output:
        """One STX … ETX frame: tag data, maybe a checksum, maybe CR LF before the ETX."""
        body = raw.rstrip(b"\r\n")
        framed = b"\x02" + raw + b"\x03"
        checksum_digits = _FRAMED_LENGTHS[self.checksum].get(len(body))
        if checksum_digits is None or not set(body) <= _HEX_BYTES:
            return Problem("bad_frame", f"not a tag frame {size_of(framed)}", framed)
        text = body.decode("ascii").upper()
        data = text[:len(text) - checksum_digits]
        if checksum_digits and xor_checksum(data) != int(text[len(data):], 16):
            return Problem("bad_checksum",
                           f"rfid frame with a bad checksum dropped {size_of(framed)}", framed)
        return self._tag(data, at)

    def _tag(self, uid: str, at: float) -> Output:
        previous, self._last = self._last, (uid, at)
        if (self.repeat_window_seconds and previous is not None and previous[0] == uid
                and 0 <= at - previous[1] <= self.repeat_window_seconds):
            # the reader reports a tag again while it is still on the antenna: one card
            return Problem("repeat", f"a tag reported again within "
                                     f"{self.repeat_window_seconds:g} s; taken for one read",
                           uid.encode("ascii"), level="debug")
        entry = self.registry.get(uid)
        if entry is None:
            return Misread(at, "rfid_unknown_uid", "a tag that is not in the card registry",
                           {"tag": uid})
        if uid in self._seen:
            card = entry if isinstance(entry, str) else entry.code  # CUT, or the card's code
            return Misread(at, "rfid_duplicate_uid", "a tag already read in this shoe came again",
                           {"tag": uid, "card": card})
        self._seen.add(uid)
        # the only string a registry holds is CUT (parse_registry makes no other)
        return CutCard(at, uid) if isinstance(entry, str) else CardScan(at, entry, uid)


class RfidEncoder:
    """What an RFID reader sends (for the simulator and tests): lines, or STX/ETX frames with
    the XOR checksum and ``line_end`` (CR LF like an ID-20LA; b"" like an RDM630)."""

    UNKNOWN_UID = "04EE0000000BAD"
    UNKNOWN_UID_FRAMED = "5AEE000BAD"

    def __init__(self, framing: str = "line", line_end: bytes = b"\r\n",
                 with_checksum: bool = True):
        self.framing = framing
        self.line_end = line_end
        self.with_checksum = with_checksum

    def tag(self, uid: str) -> bytes:
        if self.framing != "stx_etx":
            return f"{uid}\r\n".encode("ascii")
        checksum = f"{xor_checksum(uid):02X}" if self.with_checksum else ""
        return b"\x02" + f"{uid}{checksum}".encode("ascii") + self.line_end + b"\x03"

    def misread(self) -> bytes:
        """An RFID reader has no "not read" message; a tag outside the registry stands in."""
        return self.tag(self.UNKNOWN_UID_FRAMED if self.framing == "stx_etx"
                        else self.UNKNOWN_UID)

    def corrupt(self, frame: bytes) -> bytes:
        """A damaged frame that cannot be taken for a UID: a line with a byte no UID has, or a
        framed read whose checksum does not hold (its last checksum digit changed)."""
        if self.framing == "stx_etx" and self.with_checksum:
            end = frame.index(b"\x03") - len(self.line_end)
            digit = frame[end - 1:end]
            return frame[:end - 1] + (b"0" if digit != b"0" else b"1") + frame[end:]
        return frame[:4] + b"\xa7Z" + frame[6:]
