"""Sealed under every fault, as a property: arbitrary and damaged frames of all three shoe
protocols, many naming cards of the open round, go through the real shoe driver (parser,
problem log) and the real table machine while betting is open; no event, status, prompt,
STATUS line or log line at INFO or above names any of those cards, their tag ids or the raw
frames. Once the round is over, ``fault_detail`` events carry what the shoe sent."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.rules.cards import ALL_CARDS, Card
from controller.service.status_board import status_line
from controller.table.inputs import Button, CardScan, Input, Misread, Supervisor, Tick
from controller.table.machine import MachineSettings, TableMachine
from drivers.protocols.pdt import PdtEncoder, encode_frame
from drivers.protocols.rfid import RfidEncoder, simulated_registry, simulated_uid, write_registry
from drivers.shoe import SerialShoe
from support.sealing import Leaks

PROTOCOLS = ("beetek", "rfid", "rfid_stx_etx", "pdt")
RANK_SPELLINGS = {"T": ["T", "10", "t"], "A": ["A", "a", "1"]}
SUIT_SPELLINGS = {"S": ["S", "s", "♠"], "H": ["H", "h", "♥"], "D": ["D", "d", "♦"],
                  "C": ["C", "c", "♣"]}

_registry_dir = Path(tempfile.mkdtemp(prefix="pokdeng-sealing-"))
REGISTRY = simulated_registry(8)
REGISTRY_PATH = _registry_dir / "cards.csv"
write_registry(REGISTRY, REGISTRY_PATH)
# The simulated registry gives card i of a fresh 8-deck shoe the tag simulated_uid(i).
TAG_OF = {}
for index, entry in enumerate(REGISTRY.values()):
    if isinstance(entry, Card):
        TAG_OF.setdefault(entry.code, []).append(simulated_uid(index))
# The same for a framed (125 kHz, STX/ETX) reader, whose tags are 5 bytes.
FRAMED_REGISTRY = simulated_registry(8, "stx_etx")
FRAMED_REGISTRY_PATH = _registry_dir / "cards-framed.csv"
write_registry(FRAMED_REGISTRY, FRAMED_REGISTRY_PATH)
FRAMED_TAG_OF = {}
for index, entry in enumerate(FRAMED_REGISTRY.values()):
    if isinstance(entry, Card):
        FRAMED_TAG_OF.setdefault(entry.code, []).append(simulated_uid(index, "stx_etx"))


@st.composite
def spelled(draw, card: Card) -> str:
    """A card code as some shoe might spell it: 7S, s7, 10h, Q♥ …"""
    rank = draw(st.sampled_from(RANK_SPELLINGS.get(card.code[0], [card.code[0],
                                                                  card.code[0].lower()])))
    suit = draw(st.sampled_from(SUIT_SPELLINGS[card.code[1]]))
    return rank + suit if draw(st.booleans()) or suit in "♠♥♦♣" else suit + rank


@st.composite
def damaged(draw, frame: bytes) -> bytes:
    """One frame hit on the wire: a byte changed, added or lost, or the frame cut short."""
    how = draw(st.sampled_from(["change", "insert", "delete", "cut", "noise_inside"]))
    at = draw(st.integers(0, max(0, len(frame) - 1)))
    if how == "change":
        return frame[:at] + bytes([draw(st.integers(0, 255))]) + frame[at + 1:]
    if how == "insert":
        return frame[:at] + draw(st.binary(min_size=1, max_size=3)) + frame[at:]
    if how == "delete":
        return frame[:at] + frame[at + 1:]
    if how == "cut":
        return frame[:at]
    return frame[:at] + b"\r\n" + frame[at:]  # a line end inside the frame splits it


def ascii_only(spelling: str, card: Card) -> str:
    """The spelling with a suit symbol replaced by its letter (for ASCII-only protocols)."""
    return "".join(card.code[1] if ch in "♠♥♦♣" else ch for ch in spelling)


class Table:
    """The real shoe driver feeding the real machine, with every channel watched."""

    def __init__(self, protocol: str, decks: int, caplog: pytest.LogCaptureFixture):
        self.machine = TableMachine(MachineSettings(betting_seconds=600, decks=decks))
        self.at = 0.0
        self.inputs: list[Input] = []
        options: dict[str, object] = {"url": "loop://", "protocol": protocol}
        if protocol == "rfid":
            options["registry"] = str(REGISTRY_PATH)
        if protocol == "rfid_stx_etx":  # a reader that repeats its frames while a tag stays
            options.update(protocol="rfid", registry=str(FRAMED_REGISTRY_PATH),
                           framing="stx_etx", repeat_window_seconds=1.5)
        self.shoe = SerialShoe(self.inputs.append, options, clock=self.clock)
        self.caplog = caplog
        self.leaks = Leaks()
        self.events: list[dict] = []
        self.evidence: list[dict[str, str]] = []

    def clock(self) -> float:
        self.at += 0.01
        return self.at

    def handle(self, inp: Input) -> list[dict]:
        events = self.machine.handle(inp)
        self.events.extend(events)
        return events

    def bytes_in(self, data: bytes) -> None:
        """Bytes from the shoe: through the driver into the machine, then check every channel."""
        self.shoe.receive(data)
        while self.inputs:
            inp = self.inputs.pop(0)
            if isinstance(inp, Misread) and inp.evidence:
                self.evidence.append(inp.evidence)
            self.check(self.handle(inp))

    def act(self, inp: Input) -> None:
        self.check(self.handle(inp))

    def check(self, events: list[dict]) -> None:
        assert self.machine.round is not None and self.machine.round.betting_open
        for event in events:
            self.leaks.check(f"{event['type']} event", event)
        status = self.machine.status()
        self.leaks.check("status", status)
        self.leaks.check("prompt", self.machine.prompt())
        self.leaks.check("STATUS line", status_line(status))
        for record in self.caplog.records:
            if record.levelno >= logging.INFO:
                self.leaks.check(f"{record.levelname} log", record.getMessage())
        self.caplog.clear()


@st.composite
def fault_sessions(draw):
    decks = draw(st.sampled_from([1, 8]))
    moves = draw(st.lists(st.tuples(
        st.sampled_from(["good", "damaged", "misspelled_bad", "noise", "split", "repeat_tag",
                         "unknown_tag", "seq_conflict", "misread_text", "alarm_card",
                         "unknown_frame",
                         "sup_resume", "sup_enter", "sup_pause"]),
        st.sampled_from(ALL_CARDS), st.data()), min_size=1, max_size=25))
    return decks, moves


@pytest.mark.slow
@pytest.mark.parametrize("protocol", PROTOCOLS)
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(session=fault_sessions())
def test_no_card_tag_or_frame_of_the_open_round_leaves_the_table(protocol, session, caplog):
    decks, moves = session
    caplog.set_level(logging.INFO)
    caplog.clear()
    table = Table(protocol, decks, caplog)
    pdt = PdtEncoder()
    is_rfid = protocol.startswith("rfid")
    rfid = RfidEncoder("stx_etx") if protocol == "rfid_stx_etx" else RfidEncoder()
    registry = FRAMED_REGISTRY if protocol == "rfid_stx_etx" else REGISTRY
    tag_of = FRAMED_TAG_OF if protocol == "rfid_stx_etx" else TAG_OF
    used_tags: list[str] = []
    pdt_sent: list[int] = []

    def frame_of(card: Card, spelling: str) -> bytes:
        if protocol == "beetek":  # a shoe may send a suit symbol in UTF-8
            return f" [Game]<Card:{spelling}> ".encode()
        if protocol == "pdt":  # PDT firmware speaks ASCII
            pdt_sent.append(pdt.seq)
            return pdt.card(ascii_only(spelling, card))
        tag = tag_of[card.code][len([t for t in used_tags if registry[t] == card])
                                % len(tag_of[card.code])]
        used_tags.append(tag)
        table.leaks.add_tag(tag)
        return rfid.tag(tag)

    # A shoe opened, its flip card and burn drawn, a round opened: betting is open.
    table.handle(Button(table.clock(), "new_shoe"))
    if protocol == "pdt":
        table.shoe.receive(pdt.hello())
        table.inputs.clear()
    table.handle(CardScan(table.clock(), ALL_CARDS[0]))  # AS: one burn
    table.handle(CardScan(table.clock(), ALL_CARDS[1]))
    table.handle(Button(table.clock(), "start_round"))
    assert table.machine.state == "betting"

    for move, card, data in moves:
        table.leaks.add_card(card)
        spelling = data.draw(spelled(card))
        if move == "good":
            table.bytes_in(frame_of(card, spelling))
        elif move == "damaged":
            frame = frame_of(card, spelling)
            table.leaks.add_frame(frame.decode("utf-8", "replace"))
            table.bytes_in(data.draw(damaged(frame)))
        elif move == "misspelled_bad":  # a card frame whose code cannot be read
            bad = spelling + data.draw(st.sampled_from(["?", "X", "#", " 9"]))
            raw = (f"<Card:{bad}>".encode() if protocol == "beetek"
                   else pdt.card(ascii_only(bad, card)) if protocol == "pdt"
                   else rfid.tag(tag_of[card.code][0][:-2] + "ZZ") if protocol == "rfid"
                   else f"\x02{tag_of[card.code][0][:-2]}ZZ\r\n\x03".encode())
            table.leaks.add_frame(raw.decode("utf-8", "replace"))
            table.bytes_in(raw)
        elif move == "noise":
            table.bytes_in(data.draw(st.binary(max_size=40)) + spelling.encode())
        elif move == "split":  # half a frame, garbage, then the rest
            frame = frame_of(card, spelling)
            cut = data.draw(st.integers(1, max(1, len(frame) - 1)))
            table.bytes_in(frame[:cut])
            table.bytes_in(data.draw(st.binary(max_size=8)))
            table.bytes_in(frame[cut:])
        elif move == "repeat_tag" and is_rfid and used_tags:
            tag = data.draw(st.sampled_from(used_tags))
            table.leaks.add_card(registry[tag])
            table.bytes_in(rfid.tag(tag))
        elif move == "unknown_tag" and is_rfid:
            tag = data.draw(st.sampled_from(["04EE0000000BAD", "DEADBEEF", "0011AABBCCDDEE"]
                                            if protocol == "rfid" else
                                            ["5AEE000BAD", "0011AABBCC", "00FF00FF00FF"]))
            table.leaks.add_tag(tag)
            table.bytes_in(rfid.tag(tag))
        elif move == "seq_conflict" and protocol == "pdt" and pdt_sent:
            seq = data.draw(st.sampled_from(pdt_sent))
            raw = encode_frame(seq, "CARD", ascii_only(spelling, card))
            table.leaks.add_frame(raw.decode("utf-8", "replace").strip())
            table.bytes_in(raw)
        elif move == "misread_text":
            raw = (pdt.misread("E1", f"partial {ascii_only(spelling, card)}")
                   if protocol == "pdt" else f"<Alarm:E3 {spelling}>".encode())
            table.bytes_in(raw)
        elif move == "alarm_card":
            table.bytes_in(f"<Alarm:{spelling}>".encode() if protocol != "pdt"
                           else pdt.misread(ascii_only(spelling, card), card.code))
        elif move == "unknown_frame" and not is_rfid:  # e.g. a cut card the config lacks
            raw = (f"<Shoe:{spelling}>".encode() if protocol == "beetek"
                   else pdt._next("NEWTYPE", ascii_only(spelling, card)))
            table.leaks.add_frame(raw.decode("utf-8", "replace").strip())
            table.bytes_in(raw)
        elif move == "sup_resume":
            table.act(Supervisor(table.clock(), "resume"))
        elif move == "sup_enter":
            table.act(Supervisor(table.clock(), "enter_card", card))
        elif move == "sup_pause":
            table.act(Supervisor(table.clock(), "pause"))

    # The round ends: what the shoe sent is published, so the supervisor learns it.
    table.machine.handle(Tick(table.clock()))
    after = table.handle(Supervisor(table.clock(), "cancel_round"))
    details = [e["data"]["evidence"] for e in after if e["type"] == "fault_detail"]
    for evidence in table.evidence:
        assert evidence in details, f"{evidence} never published after the round"
