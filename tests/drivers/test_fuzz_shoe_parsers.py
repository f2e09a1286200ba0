"""Property-based fuzzing of every shoe parser with hypothesis.

Each example is a list of 100-150 chunks fed one after another to one parser; a chunk is a
real frame (from the protocol's encoder), a damaged frame, a piece of protocol syntax or
random bytes, and chunks are glued and split at random, so frames arrive whole, split,
mangled and interleaved with noise. We count chunks fed ("generated inputs"):
``EXAMPLES * 100 >= 100,000`` per parser, and each test asserts the count it really fed.

Properties: nothing escapes but the protocol's own errors (none are expected for wire bytes);
every output is a shoe input or a Problem; the unfinished-frame buffer never exceeds the cap;
and the outputs do not depend on how the bytes were split (whole stream == chunked stream).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.rules.cards import ALL_CARDS
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.protocols.base import Problem, ProtocolError
from drivers.protocols.beetek import BeeTekEncoder, BeeTekParser
from drivers.protocols.pdt import PdtEncoder, PdtParser, encode_frame
from drivers.protocols.rfid import RfidEncoder, RfidParser, simulated_registry, simulated_uid

EXAMPLES = 1000
MIN_CHUNKS = 100
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_codes = [card.code for card in ALL_CARDS]
_bee = BeeTekEncoder()
_rfid = RfidEncoder()
_pdt = PdtEncoder()

BEETEK_PIECES = ([_bee.card(c) for c in _codes[:13]] + [_bee.card(c[::-1], "Manual Burn Cards")
                                                        for c in _codes[13:26]]
                 + [_bee.cut_card(), _bee.misread(), _bee.warning(),
                    b"<Alarm:E3 Card Not Read>", b"<Card:", b"<", b">", b"[", b"]", b"[Game]",
                    b"<Card:10h>", b"<Card:ZZ>", b"\r\n", b" ", b"<" + b"x" * 70 + b">",
                    _bee.corrupt(_bee.card("AS"))])
RFID_PIECES = ([_rfid.tag(simulated_uid(i)) for i in range(0, 416, 16)]
               + [_rfid.misread(), b"\x02", b"\r", b"\n", b"04:A1", b"0450", b"\xff" * 3,
                  b"A" * 70, _rfid.corrupt(_rfid.tag(simulated_uid(3)))])
_framed = RfidEncoder("stx_etx")
_rdm630 = RfidEncoder("stx_etx", line_end=b"")
_no_sum = RfidEncoder("stx_etx", with_checksum=False)
RFID_FRAMED_PIECES = ([enc.tag(simulated_uid(i, "stx_etx")) for i in range(0, 416, 16)
                       for enc in (_framed, _rdm630, _no_sum)]
                      + [_framed.misread(),
                         _framed.corrupt(_framed.tag(simulated_uid(3, "stx_etx"))),
                         b"\x02", b"\x03", b"\r\n", b" ", b"5A000", b"\x02" + b"A" * 70,
                         b"\x0200FF00FF00FF00FF\x03", b"\xff" * 3])
PDT_PIECES = ([encode_frame(seq, "CARD", c) for seq, c in enumerate(_codes[:20])]
              + [encode_frame(65534 + i, t) for i, t in enumerate(("HB", "CUT", "HB"))]
              + [encode_frame(5, "HELLO", "b1", "fw"), encode_frame(9, "HELLO", "b2", "fw"),
                 encode_frame(3, "MISREAD", "E1", "x"), encode_frame(4, "NEW", "y"),
                 _pdt.corrupt(encode_frame(2, "CARD", "KD")), b"$", b"$PDT,", b"*", b",",
                 b"\r\n", b"$PDT,1,CARD,AS*", b"$PDT," + b"9" * 140, b"\x00\xff"])


def chunks(pieces):
    """A list of MIN_CHUNKS to MIN_CHUNKS + 50 chunks, drawn as one byte string of choices
    (two bytes per chunk) plus a pool of random bytes: hypothesis draws and shrinks one
    binary far faster than a list of 100+ separate values, and the chunks are the same kind.
    A choice below 160 picks a protocol piece; above, a run of 0-11 bytes from the pool."""
    choices = st.binary(min_size=2 * MIN_CHUNKS, max_size=2 * (MIN_CHUNKS + 50))
    pool = st.binary(min_size=1, max_size=64)

    def build(drawn):
        picks, junk = drawn
        out = []
        for i in range(0, len(picks) - 1, 2):
            choice, arg = picks[i], picks[i + 1]
            if choice < 160:
                out.append(pieces[(choice + arg) % len(pieces)])
            else:
                start = arg % len(junk)
                out.append(junk[start:start + choice % 12])
        return out

    return st.tuples(choices, pool).map(build)


def check_parser(label, make_parser, buffer_size, pieces) -> int:
    fed = 0

    @SETTINGS
    @given(chunks(pieces), st.randoms(use_true_random=False))
    def run(parts, rnd):
        nonlocal fed
        # glue and re-split at random, so frames also straddle chunk boundaries
        stream = b"".join(parts)
        cuts = sorted(rnd.sample(range(len(stream) + 1), min(len(parts), len(stream) + 1)))
        pieces_fed = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)])]
        chunked, whole = make_parser(), make_parser()
        got = []
        try:
            for piece in pieces_fed:
                got.extend(chunked.feed(piece, 1.0))
                assert buffer_size(chunked) <= chunked.max_frame
            got.extend(chunked.connection_lost())
            expected = whole.feed(stream, 1.0) + whole.connection_lost()
        except ProtocolError:
            return  # the protocol's own errors are allowed (none are expected from bytes)
        fed += sum(1 for piece in pieces_fed if piece)  # feed() calls that carried bytes
        assert got == expected
        for out in got:
            assert isinstance(out, (CardScan, CutCard, Misread, Problem)), out
            if isinstance(out, Misread):
                assert out.code and out.reason
            if isinstance(out, Problem):
                assert out.code and out.message and len(out.raw) <= 4 * chunked.max_frame

    run()
    print(f"{label}: {fed} non-empty chunks fed in {EXAMPLES} examples")
    return fed


@pytest.mark.slow
def test_fuzz_beetek():
    fed = check_parser("beetek", BeeTekParser,
                       lambda p: max(len(p._buffer), len(p._garbage)), BEETEK_PIECES)
    assert fed >= 100_000


@pytest.mark.slow
def test_fuzz_rfid():
    registry = simulated_registry(8)
    fed = check_parser("rfid", lambda: RfidParser(registry), lambda p: len(p._lines._buffer),
                       RFID_PIECES)
    assert fed >= 100_000


@pytest.mark.slow
def test_fuzz_rfid_framed():
    registry = simulated_registry(8, "stx_etx")
    fed = check_parser("rfid stx_etx",
                       lambda: RfidParser(registry, 1.5, framing="stx_etx"),
                       lambda p: max(len(p._lines._buffer), len(p._lines._garbage)),
                       RFID_FRAMED_PIECES)
    assert fed >= 100_000


@pytest.mark.slow
def test_fuzz_pdt():
    fed = check_parser("pdt", PdtParser, lambda p: len(p._lines._buffer), PDT_PIECES)
    assert fed >= 100_000
