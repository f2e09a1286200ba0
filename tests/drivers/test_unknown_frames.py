"""Shoe option ``unknown_frames``: a well-formed frame the parser does not know becomes a
Misread(code="unknown_shoe_frame") with the frame in its evidence (pause, the default), or only
a logged problem (log)."""

from __future__ import annotations

import logging

import pytest

from controller.table.faults import UNKNOWN_SHOE_FRAME
from controller.table.inputs import Misread
from drivers.base import DriverConfigError
from drivers.protocols.pdt import PdtEncoder, encode_frame
from drivers.shoe import SerialShoe


def shoe(protocol: str, **options):
    got: list = []
    return SerialShoe(got.append, {"protocol": protocol, "url": "loop://", **options},
                      clock=lambda: 7.0), got


def test_beetek_unknown_frame_is_a_misread_carrying_the_frame_by_default(caplog):
    driver, got = shoe("beetek")
    caplog.set_level(logging.INFO)
    driver.receive(b" [Game]<Cut Card> ")
    assert got == [Misread(7.0, UNKNOWN_SHOE_FRAME, "the shoe sent a frame of unknown meaning",
                           {"frame": "<Cut Card>"})]
    assert "Cut Card" not in caplog.text  # the log names its size, never its content


def test_pdt_frame_of_unknown_type_is_a_misread_too():
    driver, got = shoe("pdt")
    encoder = PdtEncoder()
    driver.receive(encoder.hello() + encode_frame(0, "SHUFFLE", "7H"))
    assert [(m.code, m.evidence["frame"]) for m in got if isinstance(m, Misread)] == \
        [(UNKNOWN_SHOE_FRAME, encode_frame(0, "SHUFFLE", "7H").decode().strip())]


def test_log_keeps_the_old_behaviour():
    driver, got = shoe("beetek", unknown_frames="log")
    driver.receive(b" [Game]<Cut Card> ")
    assert got == [] and driver.counts["unknown_frame"] == 1


def test_a_warning_or_a_known_cut_card_is_no_unknown_frame():
    driver, got = shoe("beetek", cut_card_frames=["<Cut Card>"])
    driver.receive(b"<W0x01> [Game]<Cut Card> ")
    assert [inp.kind for inp in got] == ["cut_card"]


@pytest.mark.parametrize("protocol, options, fragment", [
    ("beetek", {"unknown_frames": "stop"}, '"unknown_frames": expected one of pause, log'),
    ("rfid", {"unknown_frames": "log", "registry": "x.csv"}, '"unknown_frames": unknown option'),
])
def test_bad_unknown_frames_options_are_named(protocol, options, fragment):
    with pytest.raises(DriverConfigError) as err:
        shoe(protocol, **options)
    assert fragment in str(err.value)
