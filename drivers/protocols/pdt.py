"""PDT: the line protocol of shoe firmware we control (specification: docs/pdt-protocol.md).

    $PDT,<seq>,<type>[,<field>…]*<crc>\r\n

``seq`` is decimal 0-65535 and wraps to 0; every frame consumes one. ``crc`` is CRC-16/CCITT-
FALSE over the bytes between ``$`` and ``*``, four hex digits. Types: ``HELLO,<boot>,<fw>``,
``CARD,<code>``, ``CUT``, ``MISREAD,<code>[,<text>]``, ``HB``. HELLO (sent on every connect) is
outside the sequence: its seq is the next new frame's, and the firmware then replays its last
frames, which the host drops when it already has them — so an unplug loses nothing.

The host never guesses: a bad checksum is dropped and logged (the next good frame then shows
the gap); a sequence gap becomes ``Misread(code="pdt_sequence_gap")`` because the lost frame may
have been a card; a repeated frame (same seq, same content) is a retransmission and is dropped.
"""

from __future__ import annotations

import binascii
import re
from collections import OrderedDict

from controller.rules.cards import CardCodeError, parse_card
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.protocols.base import LineShoeParser, Output, Problem, printable, size_of

SEQ_MODULO = 65536
#: how many recent frames the host remembers to recognise retransmissions
HISTORY = 64
#: how many recent frames the firmware replays after a HELLO
REPLAY = 8
_FRAME = re.compile(rb"\$(PDT,([0-9]{1,5}),([A-Z]{1,8})((?:,[^,*$\r\n]*)*))\*([0-9A-Fa-f]{4})")


def crc16_ccitt_false(data: bytes) -> int:
    """CRC-16/CCITT-FALSE: polynomial 0x1021, initial 0xFFFF, no reflection, no final XOR —
    what ``binascii.crc_hqx`` computes from that initial value (in C).
    Check value: crc16_ccitt_false(b"123456789") == 0x29B1."""
    return binascii.crc_hqx(data, 0xFFFF)


def encode_frame(seq: int, frame_type: str, *fields: str) -> bytes:
    body = ",".join(["PDT", str(seq % SEQ_MODULO), frame_type, *fields]).encode("ascii")
    return b"$" + body + b"*" + f"{crc16_ccitt_false(body):04X}".encode("ascii") + b"\r\n"


def frame_seq(frame: bytes) -> int | None:
    """The sequence number of an encoded frame (None if it is not one)."""
    match = _FRAME.match(frame)
    return int(match.group(2)) if match else None


class PdtParser(LineShoeParser):
    name = "pdt"
    default_baudrate = 115200
    max_frame = 128
    frame_start = b"$"
    too_long_message = "over-long pdt frame"

    def __init__(self) -> None:
        super().__init__()
        self._expected: int | None = None  # seq of the next frame; None until the first one
        self._history: OrderedDict[int, bytes] = OrderedDict()  # recent accepted frames
        self._boot: str | None = None
        #: valid frames of any type received (heartbeats included): the driver's liveness signal
        self.frames_ok = 0

    def _line(self, raw: bytes, at: float) -> list[Output]:
        match = _FRAME.fullmatch(raw)
        if match is None:
            code = "garbage" if not raw.startswith(b"$") else "bad_frame"
            return [Problem(code, f"not a pdt frame {size_of(raw)}", raw)]
        body, seq_text, frame_type, rest, crc_text = match.groups()
        if crc16_ccitt_false(body) != int(crc_text, 16):
            return [Problem("bad_checksum",
                            f"pdt frame with a bad checksum dropped {size_of(raw)}", raw)]
        seq = int(seq_text)
        if seq >= SEQ_MODULO:
            return [Problem("bad_frame", f"pdt sequence number out of range {size_of(raw)}", raw)]
        fields = [f.decode("ascii") for f in rest.split(b",")[1:]] if rest else []
        kind = frame_type.decode("ascii")
        if kind == "HELLO":
            self.frames_ok += 1
            return self._hello(seq, fields, raw, at)
        out: list[Output] = []
        if self._expected is not None and seq != self._expected:
            if (seq - self._expected) % SEQ_MODULO >= SEQ_MODULO // 2:  # behind: a replay
                return self._replayed(seq, raw, at)
            out.append(self._gap(seq, at))
        self._accept(seq, raw)
        out.extend(self._payload(kind, fields, raw, at))
        return out

    def _accept(self, seq: int, raw: bytes) -> None:
        self._expected = (seq + 1) % SEQ_MODULO
        self._history[seq] = raw
        self._history.move_to_end(seq)
        while len(self._history) > HISTORY:
            self._history.popitem(last=False)
        self.frames_ok += 1

    def _replayed(self, seq: int, raw: bytes, at: float) -> list[Output]:
        """A frame older than the next one due: a retransmission, unless its content differs."""
        known = self._history.get(seq)
        if known == raw:
            self.frames_ok += 1
            return [Problem("duplicate", f"retransmitted pdt frame {seq} already had", raw,
                            level="debug")]
        if known is not None:
            return [Misread(at, "pdt_sequence_conflict",
                            f"frame {seq} came again with different content",
                            {"frame": printable(known), "frame_again": printable(raw)})]
        return [Problem("stale", f"pdt frame {seq} is older than frame {self._expected} "
                                 f"due and was not received before; dropped {size_of(raw)}",
                        raw)]

    def _gap(self, seq: int, at: float) -> Misread:
        expected = self._expected if self._expected is not None else seq
        missing = (seq - expected) % SEQ_MODULO
        span = (f"frame {expected}" if missing == 1
                else f"frames {expected} to {(seq - 1) % SEQ_MODULO}")
        return Misread(at, "pdt_sequence_gap",
                       f"{span} never arrived intact; a card may be missing")

    def _hello(self, seq: int, fields: list[str], raw: bytes, at: float) -> list[Output]:
        """HELLO is outside the sequence: its seq is the number of the firmware's next new
        frame. After it the firmware replays its recent frames; the host drops the ones it has."""
        boot = fields[0] if fields else ""
        out: list[Output] = []
        if self._boot is None or boot != self._boot:
            if self._boot is not None:
                # the firmware restarted: what it read but had not sent is gone, and we
                # cannot tell whether that was a card
                out.append(Misread(at, "pdt_restart",
                                   "shoe firmware restarted; a card read just before may be "
                                   "missing", {"boot": printable(self._boot.encode()),
                                               "boot_now": printable(boot.encode())}))
            # frames numbered before this hello were sent before we (or this boot) began
            self._expected = seq
            self._history.clear()
        self._boot = boot
        # boot and firmware ids are the device's own text: DEBUG only, with the frame
        out.append(Problem("hello", f"shoe says hello; next frame {seq}", raw, level="info"))
        return out

    def _payload(self, kind: str, fields: list[str], raw: bytes, at: float) -> list[Output]:
        if kind == "CARD":
            try:
                if len(fields) != 1:
                    raise CardCodeError(",".join(fields), "expected one field")
                return [CardScan(at, parse_card(fields[0]))]
            except CardCodeError:
                return [Misread(at, "pdt_bad_card", "shoe sent a card frame with no valid card",
                                {"frame": printable(raw)})]
        if kind == "CUT":
            return [CutCard(at)]
        if kind == "MISREAD":
            # the firmware's own words are evidence: a partial read may name the card
            return [Misread(at, "pdt_misread", "shoe could not read a card",
                            {"frame": printable(raw)})]
        if kind == "HB":
            return []
        return [Problem("unknown_type", f"pdt frame of unknown type ignored {size_of(raw)}", raw)]


class PdtEncoder:
    """Frames as PDT firmware sends them (for the simulator and tests); numbers them itself
    and keeps the last ``REPLAY`` frames for the replay after a HELLO."""

    def __init__(self, boot: str = "sim", firmware: str = "sim-1", seq: int = 0):
        self.boot = boot
        self.firmware = firmware
        self.seq = seq % SEQ_MODULO
        self.recent: list[bytes] = []

    def _next(self, frame_type: str, *fields: str) -> bytes:
        frame = encode_frame(self.seq, frame_type, *fields)
        self.seq = (self.seq + 1) % SEQ_MODULO
        self.recent = (self.recent + [frame])[-REPLAY:]
        return frame

    def hello(self, next_seq: int | None = None) -> bytes:
        """HELLO then the replay of the recent frames, as sent on every (re)connect.

        ``next_seq`` is the first frame not yet transmitted when frames are numbered before
        they go out (default: every numbered frame has gone out)."""
        seq = self.seq if next_seq is None else next_seq % SEQ_MODULO
        replay = []
        for frame in self.recent:
            if frame_seq(frame) == seq:
                break
            replay.append(frame)
        return encode_frame(seq, "HELLO", self.boot, self.firmware) + b"".join(replay)

    def card(self, code: str) -> bytes:
        return self._next("CARD", code)

    def cut_card(self) -> bytes:
        return self._next("CUT")

    def misread(self, code: str = "E1", text: str = "no card code") -> bytes:
        return self._next("MISREAD", code, text)

    def heartbeat(self) -> bytes:
        return self._next("HB")

    def corrupt(self, frame: bytes) -> bytes:
        """The same frame with its checksum broken (a line hit on the wire)."""
        star = frame.rindex(b"*")
        crc = int(frame[star + 1:star + 5], 16) ^ 0x0101
        return frame[:star + 1] + f"{crc:04X}".encode("ascii") + frame[star + 5:]
