"""End to end: ``read-shoe --learn-cut`` as a real subprocess on a simulated shoe's real pty:
the technician draws a card, then the cut card; the tool names the frame and prints the line
the config needs, and that line makes the driver read the frame as the cut card."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from drivers.protocols.rfid import load_registry
from drivers.shoe import SerialShoe
from drivers.sim.shoe import ShoeSimulator

CLI = [sys.executable, "-m", "controller"]


def learn(link, *extra):
    return subprocess.Popen(CLI + ["read-shoe", str(link), "--learn-cut",
                                   "--reconnect-seconds", "0.1", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_learns_a_beetek_cut_card_frame_and_the_line_it_prints_works(tmp_path):
    link = tmp_path / "shoe"
    with ShoeSimulator(link, "beetek") as sim:
        proc = learn(link)
        try:
            sim.send_card("7H")  # the simulator waits until the tool has the port open
            sim.send_raw(b" [Game]<Cut Card> ")
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    assert "that was a card (7♥), not the cut card" in err
    assert "the shoe sent <Cut Card> (not a card)" in err
    assert out.strip() == 'cut_card_frames: ["<Cut Card>"]'
    learned = yaml.safe_load(out)
    got: list = []
    driver = SerialShoe(got.append, {"protocol": "beetek", "url": "loop://", **learned})
    driver.receive(b" [Game]<Cut Card> ")
    assert [inp.kind for inp in got] == ["cut_card"]


@pytest.mark.slow
def test_learns_an_rfid_cut_card_tag_as_a_registry_line(tmp_path):
    link = tmp_path / "shoe"
    with ShoeSimulator(link, "rfid", framing="stx_etx", decks=1) as sim:
        registry = tmp_path / "cards.csv"
        lines = [line for line in sim.registry_path.read_text().splitlines()
                 if not line.endswith(",CUT")]  # a registry that lacks the cut card
        registry.write_text("\n".join(lines) + "\n")
        proc = learn(link, "--protocol", "rfid", "--framing", "stx_etx",
                     "--registry", str(registry))
        try:
            sim.send_cut_card()
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    assert out.strip() == "5ACC00C007,CUT" and "not in the registry" in err
    with registry.open("a") as table:
        table.write(out)
    assert load_registry(registry)["5ACC00C007"] == "CUT"


def test_gives_up_cleanly_when_no_cut_card_comes(tmp_path):
    proc = learn(tmp_path / "no-shoe")
    while "waiting for the shoe" not in proc.stderr.readline():  # its signal handlers are set
        assert proc.poll() is None
    proc.terminate()
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 1 and out == ""
    assert "nothing learned" in err and "Traceback" not in err
