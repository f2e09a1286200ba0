"""``pokdeng-table roadmap`` as a real subprocess against a real journal written the daemon's way
(the table machine's events appended input by input), archives included."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from controller.durability.archives.archive import archive_closed_shoes
from controller.durability.journal import Journal, verify_file
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import Button, CardScan
from controller.table.machine import MachineSettings, TableMachine
from controller.table.roadmap import POSITIONS, Bead, Roadmap
from support.journal_helpers import event as envelope
from support.sealing import Leaks

SETTINGS = MachineSettings(table_id="T7", decks=1)  # one-deck shoes: a few rounds each
SVG = "{http://www.w3.org/2000/svg}"
LETTERS = {"W": "win", "L": "lose", "T": "tie"}


class Table:
    """Whole shoes through the machine into a journal; the last shoe stops with betting open."""

    def __init__(self, path: Path, shoes: int = 3):
        self.path = path
        self.events: list[dict] = []
        self.open_cards: list[str] = []  # the cards of the round whose betting is still open
        machine = TableMachine(SETTINGS)
        self.journal = Journal(path)
        for seed in range(11, 11 + shoes):
            self.feed(machine, shoe_script(seed, decks=1, start_at=machine.clock + 5))
        # a fourth shoe: one whole round, then a round dealt while its betting is open
        script = shoe_script(11 + shoes, decks=1, start_at=machine.clock + 5)
        starts = [i for i, inp in enumerate(script)
                  if isinstance(inp, Button) and inp.name == "start_round"]
        open_round = script[starts[1]:starts[1] + 9]
        self.feed(machine, script[:starts[1]] + open_round)
        self.open_cards = [inp.card.code for inp in open_round if isinstance(inp, CardScan)]
        assert machine.state == "betting"

    def feed(self, machine: TableMachine, inputs) -> None:
        for inp in inputs:
            events = machine.handle(inp)
            self.journal.append(inp, events)
            self.events.extend(events)

    def shoe(self, number: int) -> Roadmap:
        return Roadmap.from_events(e for e in self.events if e["shoe"] == number)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    t = Table(tmp_path_factory.mktemp("roadmap") / "journal.sqlite")
    yield t  # the journal stays open for writing, as under a running daemon
    t.journal.close()


def roadmap_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", "roadmap", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def parse_plain(text: str) -> tuple[str, dict[int, list[Bead]]]:
    """The heading and each position's beads, read back from the plain text the command prints
    (columns of six, down then right; the round numbers are not printed, so they come out as
    0)."""
    lines = text.splitlines()
    plates: dict[int, list[Bead]] = {}
    for i, line in enumerate(lines):
        if not line.startswith("Player "):
            continue
        position = int(line.split()[1])
        rows = [row[2:] for row in lines[i + 1:i + 7]]
        columns = max(len(row) for row in rows) // 4 + 1
        cells = []
        for column in range(columns):
            for row in rows:
                cell = row[column * 4:column * 4 + 4].ljust(4)
                if cell[1] in LETTERS:
                    cells.append(Bead(0, LETTERS[cell[1]], cell[0] == "(" and cell[2] == ")",
                                      cell[3] == "p"))
        plates[position] = cells
    return lines[0], plates


def unnumbered(roadmap: Roadmap) -> dict[int, list[Bead]]:
    return {p: [Bead(0, b.outcome, b.flush, b.pair) for b in roadmap.beads[p]]
            for p in POSITIONS}


def test_the_latest_shoe_in_plain_text_when_piped(table):
    done = roadmap_cli(str(table.path))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    heading, plates = parse_plain(done.stdout)
    assert heading == "Roadmap — shoe 4 · T7 · 1 round (round 1)"
    assert plates == unnumbered(table.shoe(4))
    assert "Columns of six fill top to bottom, then left to right" in done.stdout


def test_every_earlier_shoe_by_number(table):
    for number in (1, 2, 3):
        done = roadmap_cli(str(table.path), "--shoe", str(number))
        assert done.returncode == 0, done.stderr
        heading, plates = parse_plain(done.stdout)
        expected = table.shoe(number)
        assert heading.startswith(f"Roadmap — shoe {number} · T7 · {len(expected.rounds)} round")
        assert plates == unnumbered(expected)
        assert sum(len(beads) for beads in plates.values()) == 5 * len(expected.rounds) > 0


def test_no_such_shoe_says_which_shoes_there_are(table):
    done = roadmap_cli(str(table.path), "--shoe", "9")
    assert done.returncode == 1
    assert done.stderr == f"pokdeng-table roadmap: {table.path}: no shoe 9; it holds shoes " \
                          "1-4\n"
    assert done.stdout == ""


def test_svg_for_a_dispute_file(table, tmp_path):
    out = tmp_path / "dispute" / "shoe2.svg"
    out.parent.mkdir()
    done = roadmap_cli(str(table.path), "--shoe", "2", "--svg", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    root = ET.parse(out).getroot()
    drawn = [(int(g.get("data-position")),
              Bead(int(g.get("data-round")), g.get("data-outcome"),
                   g.get("data-flush") == "true", g.get("data-pair") == "true"))
             for g in root.iter(f"{SVG}g") if g.get("class") == "bead"]
    expected = table.shoe(2)
    assert drawn == [(p, bead) for p in POSITIONS for bead in expected.beads[p]]
    assert [p.name for p in out.parent.iterdir()] == ["shoe2.svg"]  # no temporary left over
    to_stdout = roadmap_cli(str(table.path), "--shoe", "2", "--svg", "-")
    assert to_stdout.returncode == 0 and to_stdout.stdout == out.read_text(encoding="utf-8")


def test_json(table):
    done = roadmap_cli(str(table.path), "--shoe", "3", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == table.shoe(3).to_json()


def test_an_unwritable_output_is_named_and_nothing_is_left(table, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    done = roadmap_cli(str(table.path), "--svg", str(blocker / "r.svg"))
    assert done.returncode == 1
    assert done.stderr.startswith(f"pokdeng-table roadmap: cannot write {blocker / 'r.svg'}: ")
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-dir"]


def test_an_unreadable_journal_is_named(tmp_path):
    missing = roadmap_cli(str(tmp_path / "nope.sqlite"))
    assert missing.returncode == 1
    assert missing.stderr == f"pokdeng-table roadmap: {tmp_path / 'nope.sqlite'}: no such " \
                             "journal file\n"
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all\n" * 100)
    done = roadmap_cli(str(garbage))
    assert done.returncode == 1
    assert done.stderr.startswith(f"pokdeng-table roadmap: {garbage}: not a journal")


def test_an_empty_journal_says_it_holds_no_shoe(tmp_path):
    Journal(tmp_path / "j.sqlite").close()
    done = roadmap_cli(str(tmp_path / "j.sqlite"))
    assert done.returncode == 1
    assert done.stderr == f"pokdeng-table roadmap: {tmp_path / 'j.sqlite'}: no shoe in this " \
                          "journal yet\n"


def test_a_malformed_round_result_in_the_journal_is_named_by_seq_and_field(tmp_path):
    path = tmp_path / "j.sqlite"
    good = {"result": "win", "flush": False, "pair": False}
    positions = {f"P{p}": {"bead": dict(good)} for p in POSITIONS}
    positions["P2"]["bead"]["result"] = "purple"
    with Journal(path) as journal:
        journal.append(Button(0.0, "new_shoe"), [envelope(1, "shoe_started")])
        journal.append(Button(1.0, "reveal"),
                       [envelope(2, "round_result", positions=positions, hands={})])
    done = roadmap_cli(str(path))
    assert done.returncode == 1
    assert done.stderr == (f"pokdeng-table roadmap: {path}: round_result seq 2: "
                           "data.positions.P2.bead.result is 'purple', expected one of win, "
                           "lose, tie\n")


def test_the_journal_is_only_read(table):
    records = table.journal.record_count()
    before = table.path.stat().st_mtime_ns
    assert roadmap_cli(str(table.path)).returncode == 0
    assert table.path.stat().st_mtime_ns == before
    assert table.journal.record_count() == records and verify_file(table.path).ok


@pytest.mark.slow
def test_archived_shoes_with_archives(tmp_path):
    t = Table(tmp_path / "journal.sqlite", shoes=2)
    try:
        result = archive_closed_shoes(t.path, 0.0, settings=SETTINGS)
        assert result.archived and result.shoes == (1, 2)
        live = roadmap_cli(str(t.path), "--shoe", "1")
        assert live.returncode == 1
        assert live.stderr == (f"pokdeng-table roadmap: {t.path}: no shoe 1; it holds shoe 3 "
                               "(older shoes are archived: add --archives)\n")
        for args in (["--archives"], ["--archives", str(t.path) + ".archive"]):
            done = roadmap_cli(str(t.path), "--shoe", "1", *args)
            assert done.returncode == 0, done.stderr
            assert parse_plain(done.stdout)[1] == unnumbered(t.shoe(1))
        latest = roadmap_cli(str(t.path), "--archives")
        assert parse_plain(latest.stdout)[1] == unnumbered(t.shoe(3))
    finally:
        t.journal.close()


def test_nothing_of_the_round_whose_betting_is_open_is_shown(table, tmp_path):
    """The journal holds the open round's cards; no output of the command names one."""
    assert len(table.open_cards) >= 8
    leaks = Leaks()
    for card in table.open_cards:
        leaks.add_card(card)
    svg = tmp_path / "open.svg"
    outputs = {
        "text": roadmap_cli(str(table.path)).stdout,
        "json": roadmap_cli(str(table.path), "--json").stdout,
        "svg": roadmap_cli(str(table.path), "--svg", str(svg)).stdout + svg.read_text(),
    }
    for channel, text in outputs.items():
        assert text.strip() or channel == "svg"
        leaks.check(f"roadmap {channel}", text)


def run_on_a_terminal(args: list[str], env: dict) -> str:
    """The command with its standard output on a real pty; what it wrote there."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "controller", "roadmap", *args],
                                stdout=slave, stderr=subprocess.PIPE,
                                env={**os.environ, "TERM": "xterm-256color", **env})
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
        proc.stderr.close()
    finally:
        os.close(master)
    return b"".join(chunks).decode("utf-8")


def test_colours_on_a_terminal_and_none_with_no_color(table):
    coloured = run_on_a_terminal([str(table.path), "--shoe", "1"], {"NO_COLOR": ""})
    beads = table.shoe(1).beads
    assert "\x1b[1;97;44m" in coloured  # a win on blue
    assert coloured.count("\x1b[1;97;") == sum(len(b) for b in beads.values())
    pairs = sum(b.pair for p in POSITIONS for b in beads[p])
    assert coloured.count("\x1b[93m●") == pairs
    plain = run_on_a_terminal([str(table.path), "--shoe", "1"], {"NO_COLOR": "1"})
    assert "\x1b" not in plain
    assert parse_plain(plain.replace("\r\n", "\n"))[1] == unnumbered(table.shoe(1))
