"""What every shoe protocol parser shares: its outputs, its problems and its counters.

A parser is pure and incremental: ``feed(data, at)`` takes whatever bytes the serial port gave
(any split, any garbage) and returns what they completed — table inputs stamped with ``at``
(``CardScan``, ``CutCard``, ``Misread``) and ``Problem`` reports for everything it had to throw
away. It keeps at most ``max_frame`` bytes of an unfinished frame, so a babbling device cannot
grow its memory.

Sealing: any frame may carry a card of a round whose betting is still open, so nothing a parser
says in words (a ``Problem``'s message, a ``Misread``'s reason) quotes what came off the wire.
The bytes stay in ``Problem.raw`` (hex dump at DEBUG only) and a misread's frame, tag id or card
goes in its ``evidence``, which the table keeps sealed until that round's betting has closed.
The only exceptions it may raise are ``ProtocolError`` subclasses, and only for misuse by the
host (bad options), never for bytes from the wire.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from controller.table.inputs import CardScan, CutCard, Misread


class ProtocolError(Exception):
    """Base of the errors a shoe protocol raises (bad parser options or registry)."""


class ProtocolConfigError(ProtocolError):
    """A parser option or data file is wrong; the message names it."""


@dataclass(frozen=True, slots=True)
class Problem:
    """Bytes the parser discarded or a frame it only logs.

    ``code`` is a short stable token (``garbage``, ``frame_too_long``, ``bad_checksum`` …) used
    for counting and rate limiting; ``message`` says it in plain words and never quotes the
    bytes (they may name a sealed card: use ``size_of``); ``raw`` holds the bytes concerned,
    for a hex dump at DEBUG only.
    """

    code: str
    message: str
    raw: bytes = b""
    #: how loud to log it: "warning" for lost or damaged data, "info"/"debug" for notices
    level: str = "warning"


Output = CardScan | CutCard | Misread | Problem


def size_of(raw: bytes) -> str:
    """How a message refers to bytes it may not quote: by their size."""
    return f"({len(raw)} byte{'' if len(raw) == 1 else 's'})"


def printable(raw: bytes, limit: int = 48) -> str:
    """Bytes as short text for a misread's evidence: printable ASCII kept, the rest as \\xNN.
    Never for a message or reason: those may be shown while betting is open."""
    text = "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}"
                   for b in raw[:limit])
    return text + ("…" if len(raw) > limit else "")


def hex_dump(raw: bytes, limit: int = 256) -> str:
    shown = raw[:limit]
    dump = " ".join(f"{byte:02x}" for byte in shown)
    return dump + (f" … (+{len(raw) - limit} bytes)" if len(raw) > limit else "")


class ShoeParser(ABC):
    """Base of the protocol parsers; subclasses implement ``_feed`` and ``_discard``."""

    #: protocol name as used in config (``protocol: beetek``)
    name: str = ""
    #: the usual line speed of this kind of shoe
    default_baudrate: int = 9600
    #: longest frame kept while waiting for its end; longer frames are dropped
    max_frame: int = 128

    def __init__(self) -> None:
        #: how many of each output and problem code the parser has produced
        self.counts: Counter[str] = Counter()

    def feed(self, data: bytes, at: float = 0.0) -> list[Output]:
        """Parse the next bytes; return the inputs and problems they complete, in order."""
        outputs = self._feed(bytes(data), at)
        for out in outputs:
            self.counts[out.code if isinstance(out, Problem) else out.kind] += 1
        return outputs

    def connection_lost(self) -> list[Problem]:
        """The link dropped: discard an unfinished frame (it can never complete) and say so."""
        pending = self._discard()
        if not pending:
            return []
        problem = Problem(
            "partial_frame",
            f"link lost in the middle of a frame; discarded {size_of(pending)}",
            pending,
        )
        self.counts[problem.code] += 1
        return [problem]

    def new_shoe(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """The table started a new shoe (only protocols that track a shoe care)."""

    def restore_seen(self, tags: Iterable[str]) -> None:  # noqa: B027 - optional hook
        """The tags the open shoe gave before a restart (only protocols with tags care)."""

    @abstractmethod
    def _feed(self, data: bytes, at: float) -> list[Output]:
        ...

    @abstractmethod
    def _discard(self) -> bytes:
        """Drop and return the bytes of an unfinished frame."""


class LineBuffer:
    """Splits a byte stream into lines, capped in length, for the line-based protocols.

    ``start`` (optional) is a byte that always begins a frame: seeing it mid-line drops what
    came before as garbage and starts over, so a frame right after noise is not lost.
    """

    def __init__(self, max_line: int, start: bytes | None = None):
        self.max_line = max_line
        self.start = start
        self._buffer = bytearray()
        self._overflowed = False

    def push(self, data: bytes) -> list[tuple[str, bytes]]:
        """Return ``("line", bytes)`` for each complete line and ``("garbage" |
        "frame_too_long", bytes)`` for each discarded run, in stream order."""
        found: list[tuple[str, bytes]] = []
        for byte in data:
            if byte in (0x0A, 0x0D):  # CR, LF or CRLF all end a line
                if self._overflowed:
                    found.append(("frame_too_long", bytes(self._buffer)))
                elif self._buffer:
                    found.append(("line", bytes(self._buffer)))
                self._buffer.clear()
                self._overflowed = False
                continue
            if self.start is not None and byte == self.start[0] and self._buffer:
                found.append(("frame_too_long" if self._overflowed else "garbage",
                              bytes(self._buffer)))
                self._buffer.clear()
                self._overflowed = False
            if len(self._buffer) >= self.max_line:
                # keep only the first max_line bytes as evidence; drop the rest until the line ends
                self._overflowed = True
                continue
            self._buffer.append(byte)
        return found

    def discard(self) -> bytes:
        pending = bytes(self._buffer)
        self._buffer.clear()
        self._overflowed = False
        return pending


class FrameSplitter(Protocol):
    """What ``LineShoeParser`` needs of a splitter (``LineBuffer``, rfid's ``StxEtxBuffer``)."""

    def push(self, data: bytes) -> list[tuple[str, bytes]]: ...

    def discard(self) -> bytes: ...


class LineShoeParser(ShoeParser):
    """Base of the line-based protocols: frames are lines that begin with ``frame_start``.

    Discarded runs (noise before a frame start, over-long lines) become problems here; a
    subclass implements ``_line`` for each complete line.
    """

    #: the byte every frame begins with
    frame_start: bytes = b""
    #: how the protocol calls an over-long line and noise, in problem messages
    too_long_message: str = "over-long line"
    noise_message: str = "garbage"

    def __init__(self) -> None:
        super().__init__()
        self._lines: FrameSplitter = self._splitter()

    def _splitter(self) -> FrameSplitter:
        """How the byte stream is cut into frames: lines, unless a protocol says otherwise."""
        return LineBuffer(self.max_frame, start=self.frame_start or None)

    def _discard(self) -> bytes:
        return self._lines.discard()

    def _feed(self, data: bytes, at: float) -> list[Output]:
        out: list[Output] = []
        for what, raw in self._lines.push(data):
            if what == "line":
                out.extend(self._line(raw, at))
                continue
            message = self.too_long_message if what == "frame_too_long" else self.noise_message
            out.append(Problem(what, f"dropped {message} {size_of(raw)}", raw))
        return out

    @abstractmethod
    def _line(self, raw: bytes, at: float) -> list[Output]:
        """The inputs and problems of one complete line."""
