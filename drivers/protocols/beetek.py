"""Bee-Tek style ASCII shoe protocol (9600 8N1), e.g.::

     [Game]<Card:4S>             a card dealt in the game (rank-suit or suit-rank, 10 or T)
     [Manual Burn Cards]<Card:H3>  a card read in the shoe's Manual Burn Cards mode
     [Game]<Game>                a card passed the reader but was not read  -> Misread
     <Alarm:E3 Card Not Read>    a shoe alarm                                -> Misread
     <W0x01>                     a warning: logged and counted, no input

A ``[Section]`` tag only labels the frame after it. ``[Game]`` frames come while the shoe
deals a game. ``[Manual Burn Cards]`` is the section of the shoe's "Manual Burn Cards" mode,
which the vendor's guide has the technician select from the shoe's diagnostic menu to read
cards through the shoe outside a game: the frames are ordinary reads of the cards drawn, not
cards burned by hand, and are taken as cards like any other (docs/install.md, "The shoe").

Frames are ``<…>``; bytes outside frames other than white space are garbage. Which frame is the
cut card is configuration (``cut_card_frames``), default ``<Card:CUT>``, compared without regard
to case. No public source shows the frame a Bee-Tek shoe sends for its cut card, so the default
is a guess: ``pokdeng-table read-shoe --learn-cut`` shows the real one. A frame of printable
ASCII that is none of the above is ``unknown_frame`` (the driver turns it into a pause of an
open shoe: it may be that cut card); one with bytes no shoe sends is ``damaged_frame``.

Every alarm becomes a ``Misread`` (code ``beetek_alarm_<id>``): the shoe says something went
wrong with a card, so the table pauses and the supervisor looks, rather than guessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from controller.rules.cards import CardCodeError, parse_card
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.protocols.base import (
    Output,
    Problem,
    ProtocolConfigError,
    ShoeParser,
    printable,
    size_of,
)

DEFAULT_CUT_CARD_FRAMES = ("<Card:CUT>",)
MAX_SECTION = 40
_WHITESPACE = frozenset(b" \t\r\n\x00")
_WARNING = re.compile(r"W0x[0-9A-Fa-f]{1,4}")
# An alarm id goes into the fault code, which is shown while betting is open, so only ids that
# cannot spell a card are kept (a letter that is no rank or suit, then digits: E3, F12);
# anything else is "unknown" and the whole alarm stays in the evidence.
_ALARM_ID = re.compile(r"[BEFGILMNOPRUVWXYZ]?[0-9]{1,4}", re.IGNORECASE)

_OUTSIDE, _SECTION, _FRAME, _SKIP = range(4)  # _SKIP: rest of an over-long run


class BeeTekParser(ShoeParser):
    name = "beetek"
    default_baudrate = 9600
    max_frame = 64

    def __init__(self, cut_card_frames: str | Iterable[str] = DEFAULT_CUT_CARD_FRAMES):
        super().__init__()
        if isinstance(cut_card_frames, str):
            cut_card_frames = (cut_card_frames,)
        frames = []
        for frame in cut_card_frames:
            if not (isinstance(frame, str) and frame.startswith("<") and frame.endswith(">")
                    and len(frame) > 2 and "<" not in frame[1:-1] and ">" not in frame[1:-1]):
                raise ProtocolConfigError(
                    f"beetek cut_card_frames: {frame!r} is not one frame like '<Card:CUT>'")
            frames.append(frame[1:-1].strip().lower())
        if not frames:
            raise ProtocolConfigError("beetek cut_card_frames: at least one frame is needed")
        self.cut_card_frames = frozenset(frames)
        self._state = _OUTSIDE
        self._buffer = bytearray()
        self._garbage = bytearray()
        self._section: str | None = None

    # -- byte level ---------------------------------------------------------------------------
    def _feed(self, data: bytes, at: float) -> list[Output]:
        out: list[Output] = []
        for byte in data:
            if byte == 0x3C:  # "<" always starts a frame
                self._abandon(out)
                self._state = _FRAME
            elif byte == 0x5B:  # "[" always starts a section tag
                self._abandon(out)
                self._state = _SECTION
            elif self._state == _SKIP:
                if byte in _WHITESPACE:
                    self._state = _OUTSIDE
            elif self._state == _OUTSIDE:
                if byte in _WHITESPACE:
                    self._flush_garbage(out)
                else:
                    self._garbage.append(byte)
                    if len(self._garbage) >= self.max_frame:
                        self._flush_garbage(out)
                        self._state = _SKIP
            elif self._state == _SECTION:
                if byte == 0x5D:  # "]"
                    self._section = self._buffer.decode("ascii", "replace")
                    self._buffer.clear()
                    self._state = _OUTSIDE
                elif byte in (0x0D, 0x0A) or len(self._buffer) >= MAX_SECTION:
                    self._drop("frame_too_long" if len(self._buffer) >= MAX_SECTION
                               else "garbage", b"[" + bytes(self._buffer) + bytes([byte]), out)
                else:
                    self._buffer.append(byte)
            else:  # inside a frame
                if byte == 0x3E:  # ">"
                    raw = bytes(self._buffer)
                    self._buffer.clear()
                    self._state = _OUTSIDE
                    out.extend(self._frame(raw, at))
                    self._section = None
                elif byte in (0x0D, 0x0A) or len(self._buffer) >= self.max_frame:
                    self._drop("frame_too_long" if len(self._buffer) >= self.max_frame
                               else "garbage", b"<" + bytes(self._buffer) + bytes([byte]), out)
                else:
                    self._buffer.append(byte)
        return out

    def _abandon(self, out: list[Output]) -> None:
        """A new "<" or "[" arrived: whatever was unfinished is garbage."""
        self._flush_garbage(out)
        if self._state in (_FRAME, _SECTION):
            opener = b"<" if self._state == _FRAME else b"["
            self._drop("garbage", opener + bytes(self._buffer), out)
        self._buffer.clear()
        self._state = _OUTSIDE

    def _drop(self, code: str, raw: bytes, out: list[Output]) -> None:
        what = "over-long" if code == "frame_too_long" else "unfinished"
        out.append(Problem(code, f"dropped {what} beetek frame {size_of(raw)}", raw))
        self._buffer.clear()
        # after an over-long run, skip to the next white space or frame start in silence
        self._state = _SKIP if code == "frame_too_long" else _OUTSIDE

    def _flush_garbage(self, out: list[Output]) -> None:
        if self._garbage:
            raw = bytes(self._garbage)
            out.append(Problem("garbage", f"bytes outside any frame {size_of(raw)}", raw))
            self._garbage.clear()

    def _discard(self) -> bytes:
        pending = bytes(self._garbage)
        if self._state == _FRAME:
            pending += b"<" + bytes(self._buffer)
        elif self._state == _SECTION:
            pending += b"[" + bytes(self._buffer)
        self._garbage.clear()
        self._buffer.clear()
        self._state = _OUTSIDE
        self._section = None
        return pending

    # -- frame level --------------------------------------------------------------------------
    def _frame(self, raw: bytes, at: float) -> list[Output]:
        text = raw.decode("ascii", "replace").strip()
        framed = b"<" + raw + b">"
        # What the shoe sent is evidence, never words: the frame may name a sealed card.
        evidence = {"frame": printable(framed)}
        if self._section:
            evidence["section"] = self._section[:MAX_SECTION]
        if text.lower() in self.cut_card_frames:
            return [CutCard(at)]
        head, colon, body = text.partition(":")
        head = head.strip().lower()
        if head == "card" and colon:
            try:
                return [CardScan(at, parse_card(body.strip()))]
            except CardCodeError:
                # a card went out but its code is unreadable: that is a misread, not noise
                return [Misread(at, "beetek_bad_card",
                                "shoe sent a card frame with no valid card code", evidence)]
        if head == "game" and not colon:
            return [Misread(at, "beetek_card_not_read", "shoe could not read a card", evidence)]
        if head == "alarm" and colon:
            token = _alarm_token(body.strip().split(" ", 1)[0])
            return [Misread(at, f"beetek_alarm_{token}", f"shoe alarm {token}", evidence)]
        if _WARNING.fullmatch(text):
            return [Problem("warning", f"shoe warning {text}", framed)]
        if not all(0x20 <= byte < 0x7F for byte in raw):
            # bytes no shoe sends in a frame: hit on the wire, not a frame we do not know
            return [Problem("damaged_frame", f"damaged beetek frame {size_of(framed)}", framed)]
        return [Problem("unknown_frame", f"unknown beetek frame {size_of(framed)}", framed)]


def _alarm_token(alarm_id: str) -> str:
    """The alarm id for the fault code (``E3`` -> ``e3``), or ``unknown``."""
    return alarm_id.lower() if _ALARM_ID.fullmatch(alarm_id) else "unknown"


class BeeTekEncoder:
    """Frames as a Bee-Tek style shoe sends them (for the simulator and tests)."""

    def __init__(self, cut_card_frame: str = DEFAULT_CUT_CARD_FRAMES[0]):
        self.cut_card_frame = cut_card_frame

    def card(self, code: str, section: str = "Game") -> bytes:
        return f" [{section}]<Card:{code}> ".encode("ascii")

    def cut_card(self) -> bytes:
        return f" [Game]{self.cut_card_frame} ".encode("ascii")

    def misread(self) -> bytes:
        return b" [Game]<Game> "

    def warning(self) -> bytes:
        return b"<W0x01>"

    def corrupt(self, frame: bytes) -> bytes:
        """A damaged copy of a frame that no parser may take for a card (no checksum here:
        the frame name itself is mangled)."""
        return frame.replace(b"<Card:", b"<C\xa7rd:").replace(b"<Game>", b"<G\xa7me>")
