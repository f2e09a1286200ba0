"""End to end: `simulate-shoe` and `read-shoe` as real subprocesses talking over a real pty."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from controller.table.inputs import read_script, to_json
from drivers.sim.shoe import shoe_side, shuffled_shoe
from support.waiting import wait_until

CLI = [sys.executable, "-m", "controller"]
ALL_FAULTS = "split,garbage,badsum,silence,unplug"
MISREAD_CODE = {"beetek": "beetek_card_not_read", "rfid": "rfid_unknown_uid",
                "rfid_stx_etx": "rfid_unknown_uid", "pdt": "pdt_misread"}
#: a variant of a protocol: the wire protocol and the extra options of both commands
VARIANTS = {"rfid_stx_etx": ("rfid", ["--framing", "stx_etx"])}


class LineReader:
    """Collects a subprocess's stdout lines in a thread so the test can wait on them."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, predicate, timeout=30.0):
        wait_until(lambda: predicate(self.lines), timeout, "the reader's lines", interval=0.05,
                   details=lambda: f"lines so far: {self.lines}")

    def join(self):
        self._thread.join(10)


def write_table_script(path: Path, seed: int) -> list:
    """A table script with buttons and ticks around 30 cards, a cut card and two misreads."""
    cards = shuffled_shoe(seed, decks=1)[:30]
    lines = [{"at": 0.0, "kind": "button", "name": "new_shoe"}]
    t = 0.5
    for index, card in enumerate(cards):
        if index == 5:
            lines.append({"at": t, "kind": "button", "name": "start_round"})
        if index in (9, 21):
            lines.append({"at": t, "kind": "misread"})
        if index == 17:
            lines.append({"at": t, "kind": "cut_card"})
            lines.append({"at": t, "kind": "tick"})
        lines.append({"at": t, "kind": "card", "card": card.code})
        t += 0.5
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return shoe_side(read_script(path.read_text().splitlines()))


def shoe_lines(lines):
    """read-shoe output without device lines and without times: (kind, card)."""
    found = []
    for line in lines:
        obj = json.loads(line)
        if obj["kind"] != "device":
            found.append((obj["kind"], obj.get("card")))
    return found


def wait_for_paths(sim: subprocess.Popen, *paths: Path, timeout: float = 20.0) -> None:
    """Wait until the simulator has made its link (and registry); fail if it died first."""
    def made() -> bool:
        assert sim.poll() is None, sim.stderr.read()
        return all(path.exists() for path in paths)

    wait_until(made, timeout, f"the simulator to make {paths}", interval=0.05)


def start_reader(link: Path, protocol: str, registry: Path | None, extra: tuple = ()):
    cmd = CLI + ["read-shoe", str(link), "--protocol", protocol, "--reconnect-seconds", "0.1",
                 *extra]
    if registry is not None:
        cmd += ["--registry", str(registry)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, LineReader(proc.stdout)


def stop(proc) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["beetek", "rfid", "rfid_stx_etx", "pdt"])
def test_read_shoe_prints_exactly_the_scripts_shoe_inputs_through_every_fault(tmp_path,
                                                                             variant):
    protocol, extra = VARIANTS.get(variant, (variant, []))
    script = tmp_path / "table.jsonl"
    expected = write_table_script(script, seed=len(protocol))
    link = tmp_path / "shoe"
    registry = tmp_path / "cards.csv" if protocol == "rfid" else None
    sim_cmd = CLI + ["simulate-shoe", "--link", str(link), "--protocol", protocol,
                     "--script", str(script), "--speed", "20", "--faults", ALL_FAULTS, *extra]
    if registry is not None:
        sim_cmd += ["--registry", str(registry)]
    sim = subprocess.Popen(sim_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_paths(sim, link, *([registry] if registry is not None else []))
        reader, lines = start_reader(link, protocol, registry, extra)
        try:
            sim_out, sim_err = sim.communicate(timeout=60)
            assert sim.returncode == 0, sim_err
            # the simulator leaves only after read-shoe has read every byte; then it is gone
            lines.wait_for(lambda got: len(shoe_lines(got)) >= len(expected))
            lines.wait_for(lambda got: got and '"connected": false' in got[-1])
        finally:
            status, err = stop(reader)
            lines.join()
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
    assert status == 0, err
    assert shoe_lines(lines.lines) == [(i.kind, getattr(i, "card", None) and i.card.code)
                                       for i in expected]
    misreads = [json.loads(line) for line in lines.lines if '"misread"' in line]
    assert {m["code"] for m in misreads} == {MISREAD_CODE[variant]}
    devices = [json.loads(line)["connected"] for line in lines.lines if '"device"' in line]
    assert devices == [True, False, True, False]  # found, pulled, back, simulator ended
    # the faults really happened and were reported as problems on stderr
    assert "partial_frame" in err and "stopped; received" in err
    assert ("bad_checksum" if variant in ("pdt", "rfid_stx_etx") else "garbage"
            if protocol == "beetek" else "bad_line") in err
    for line in lines.lines:  # every stdout line is a valid table-script line
        assert to_json(next(read_script([line]))) == line


@pytest.mark.slow
def test_a_shuffled_eight_deck_shoe_arrives_whole(tmp_path):
    link = tmp_path / "shoe"
    sim = subprocess.Popen(CLI + ["simulate-shoe", "--link", str(link), "--protocol", "pdt",
                                  "--seed", "77", "--speed", "5000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_paths(sim, link)
        reader, lines = start_reader(link, "pdt", None)
        try:
            _, sim_err = sim.communicate(timeout=60)
            assert sim.returncode == 0 and "seed 77" in sim_err
            lines.wait_for(lambda got: len(shoe_lines(got)) >= 417)
        finally:
            status, err = stop(reader)
            lines.join()
    finally:
        if sim.poll() is None:
            sim.kill()
    got = shoe_lines(lines.lines)
    assert status == 0
    assert len(got) == 417 and [k for k, _ in got].count("cut_card") == 1
    assert Counter(card for kind, card in got if kind == "card") == \
        Counter(card.code for card in shuffled_shoe(77, decks=8))
    assert [card for kind, card in got if kind == "card"] == \
        [card.code for card in shuffled_shoe(77, decks=8)]


def test_simulate_shoe_rejects_a_bad_script_with_its_line_number(tmp_path):
    script = tmp_path / "bad.jsonl"
    script.write_text('{"at": 0, "kind": "card", "card": "AS"}\n{"at": 1, "kind": "card"}\n')
    done = subprocess.run(CLI + ["simulate-shoe", "--link", str(tmp_path / "shoe"),
                                 "--script", str(script)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert f"{script}:2" in done.stderr and '"card"' in done.stderr
    assert not (tmp_path / "shoe").exists()


@pytest.mark.slow
@pytest.mark.parametrize("args, fragment", [
    (["--protocol", "rfid"], '"registry"'),
    (["--protocol", "rfid", "--registry", "/nonexistent.csv"], "/nonexistent.csv"),
    (["--cut-card-frame", "CUT"], "cut_card_frames"),
])
def test_read_shoe_refuses_bad_options(tmp_path, args, fragment):
    done = subprocess.run(CLI + ["read-shoe", str(tmp_path / "shoe"), *args],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and fragment in done.stderr


def test_read_shoe_without_a_shoe_reports_it_and_retries_until_sigterm(tmp_path):
    proc, lines = start_reader(tmp_path / "nothing-here", "beetek", None)
    try:
        lines.wait_for(lambda got: len(got) >= 1)
        time.sleep(0.4)
    finally:
        status, err = stop(proc)
        lines.join()
    assert status == 0
    assert [json.loads(line) for line in lines.lines][0]["connected"] is False
    assert len(lines.lines) == 1  # reported once, however many retries
    assert err.count("retrying in 0.1 s") >= 2 and "attempt 2" in err


@pytest.mark.slow
def test_simulate_shoe_hold_keeps_the_line_open_until_sigterm(tmp_path):
    script = tmp_path / "one.jsonl"
    script.write_text('{"at": 0, "kind": "card", "card": "AS"}\n')
    link = tmp_path / "shoe"
    sim = subprocess.Popen(CLI + ["simulate-shoe", "--link", str(link), "--script", str(script),
                                  "--hold"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        wait_for_paths(sim, link)
        reader, lines = start_reader(link, "beetek", None)
        try:
            lines.wait_for(lambda got: len(shoe_lines(got)) == 1)
            time.sleep(0.3)
            assert sim.poll() is None  # still holding the line
        finally:
            status, err = stop(reader)
            lines.join()
        sim.send_signal(signal.SIGTERM)
        _, sim_err = sim.communicate(timeout=15)
    finally:
        if sim.poll() is None:
            sim.kill()
    assert sim.returncode == 0 and "holding the line open" in sim_err
    assert not link.exists()  # the simulator removed its link on the way out
    assert shoe_lines(lines.lines) == [("card", "AS")]


def test_read_shoe_ends_cleanly_on_ctrl_c(tmp_path):
    proc, lines = start_reader(tmp_path / "nothing", "pdt", None)
    lines.wait_for(lambda got: len(got) >= 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    lines.join()
    assert proc.returncode == 0 and "Traceback" not in err and "stopped" in err


@pytest.mark.slow
def test_a_late_reader_gets_the_script_at_its_pace_and_read_shoe_counts_from_its_start(
        tmp_path):
    """simulate-shoe starts its script clock when the reader connects: a reader that comes
    two seconds late still gets six cards 0.3 s apart, not all at once."""
    script = tmp_path / "six.jsonl"
    cards = ["AS", "2H", "3D", "4C", "5S", "6H"]
    script.write_text("".join(json.dumps({"at": 0.3 * i, "kind": "card", "card": c}) + "\n"
                              for i, c in enumerate(cards)))
    span = 0.3 * (len(cards) - 1)
    link = tmp_path / "shoe"
    sim = subprocess.Popen(CLI + ["simulate-shoe", "--link", str(link), "--script", str(script)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_paths(sim, link)
        time.sleep(span + 0.5)  # the scenario itself: the reader starts after the script's span
        reader, lines = start_reader(link, "beetek", None)
        try:
            _, sim_err = sim.communicate(timeout=60)
            assert sim.returncode == 0 and "waiting for a reader" in sim_err
            lines.wait_for(lambda got: len(shoe_lines(got)) >= len(cards))
        finally:
            status, err = stop(reader)
            lines.join()
    finally:
        if sim.poll() is None:
            sim.kill()
    got = [json.loads(line) for line in lines.lines if '"card"' in line]
    assert [g["card"] for g in got] == cards
    times = [g["at"] for g in got]
    # seconds since read-shoe started (not the epoch), and spread like the script (the old
    # simulator, whose clock ran from its launch, sent them all within a few milliseconds)
    assert 0 < times[0] < 30
    assert times[-1] - times[0] >= span / 2, times
