"""The roadmap SVG: valid XML whose beads are exactly the model's, placed down then right in
columns of six, coloured blue/grey/green, ringed for a flush, dotted for a pair; every outside
text escaped; and, in real Chromium, every label inside its panel."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from controller.display.roadmap_svg import render_svg
from controller.table.inputs import read_script
from controller.table.machine import MachineSettings, TableMachine
from controller.table.roadmap import POSITIONS, Bead, Roadmap

SVG = "{http://www.w3.org/2000/svg}"
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture(scope="module")
def shoe_events() -> list[dict]:
    machine = TableMachine(MachineSettings())
    with open(SCRIPTS / "shoe_seed1.jsonl", encoding="utf-8") as script:
        return [e for inp in read_script(script, "seed1") for e in machine.handle(inp)]


@pytest.fixture(scope="module")
def roadmap(shoe_events) -> Roadmap:
    return Roadmap.from_events(shoe_events)


def beads_of(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "bead"]


def parts_of(bead: ET.Element, kind: str) -> list[ET.Element]:
    return [c for c in bead if c.tag == f"{SVG}circle" and c.get("class") == kind]


def hue(colour: str) -> str:
    """Which channel a #rrggbb colour leans to: 'blue', 'green', or 'grey' when none does."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    if max(r, g, b) - min(r, g, b) < 30:
        return "grey"
    return "blue" if b > max(r, g) else "green" if g > max(r, b) else "other"


def many_rounds(rounds: int) -> Roadmap:
    """A roadmap of ``rounds`` rounds from hand-made round_result events (all shapes)."""
    roadmap = Roadmap()
    outcomes = ["win", "lose", "tie"]
    for n in range(1, rounds + 1):
        positions = {f"P{p}": {"bead": {"result": outcomes[(n + p) % 3], "flush": n % 4 == p % 4,
                                        "pair": n % 5 == p}} for p in POSITIONS}
        roadmap.add({"type": "round_result", "seq": n, "shoe": 3, "round": n,
                     "table": "T9", "data": {"positions": positions}})
    return roadmap


def test_the_svg_beads_are_the_models_beads(roadmap):
    root = ET.fromstring(render_svg(roadmap))
    drawn = [(int(g.get("data-position")),
              Bead(int(g.get("data-round")), g.get("data-outcome"),
                   g.get("data-flush") == "true", g.get("data-pair") == "true"))
             for g in beads_of(root)]
    assert drawn == [(p, bead) for p in POSITIONS for bead in roadmap.beads[p]]
    assert len(drawn) == 5 * 24


def test_beads_fill_columns_of_six_down_then_right(roadmap):
    root = ET.fromstring(render_svg(roadmap))
    for position in POSITIONS:
        centres = [(float(parts_of(g, "bead-body")[0].get("cx")),
                    float(parts_of(g, "bead-body")[0].get("cy")))
                   for g in beads_of(root) if g.get("data-position") == str(position)]
        xs = sorted({x for x, _ in centres})
        ys = sorted({y for _, y in centres})
        assert len(xs) == 4 and len(ys) == 6  # 24 rounds: four full columns
        for index, (x, y) in enumerate(centres):  # in round order
            assert (xs.index(x), ys.index(y)) == (index // 6, index % 6)


def test_colour_ring_and_dot_follow_the_bead(roadmap):
    root = ET.fromstring(render_svg(roadmap))
    seen = set()
    for g in beads_of(root):
        body = parts_of(g, "bead-body")
        assert len(body) == 1
        colour = hue(body[0].get("fill"))
        assert colour == {"win": "blue", "lose": "grey", "tie": "green"}[g.get("data-outcome")]
        assert len(parts_of(g, "flush-ring")) == (g.get("data-flush") == "true")
        dots = parts_of(g, "pair-dot")
        assert len(dots) == (g.get("data-pair") == "true")
        for dot in dots:
            r, gr, b = (int(dot.get("fill")[i:i + 2], 16) for i in (1, 3, 5))
            assert r > 200 and gr > 150 and b < 80  # yellow
            assert float(dot.get("r")) < float(body[0].get("r")) / 2  # small
        ring = parts_of(g, "flush-ring")
        for circle in ring:
            assert circle.get("fill") == "none"
            assert float(circle.get("r")) > float(body[0].get("r"))  # outside the bead
        seen.add((g.get("data-outcome"), bool(ring), bool(dots)))
    assert {outcome for outcome, _, _ in seen} == {"win", "lose", "tie"}
    assert any(ring for _, ring, _ in seen) and any(dot for _, _, dot in seen)


def test_each_position_has_its_label_and_counts(roadmap):
    root = ET.fromstring(render_svg(roadmap))
    panels = [g for g in root.iter(f"{SVG}g") if g.get("class") == "position"]
    assert [int(g.get("data-position")) for g in panels] == list(POSITIONS)
    for panel in panels:
        position = int(panel.get("data-position"))
        counts = roadmap.counts(position)
        assert {key: int(panel.get(f"data-{key}")) for key in counts._fields} == \
            counts._asdict()
        texts = ["".join(t.itertext()) for t in panel.iter(f"{SVG}text")]
        assert f"Player {position}" in texts
        for word in counts._fields:
            count = [g for g in panel.iter(f"{SVG}g") if g.get("data-count") == word]
            assert len(count) == 1
            assert "".join(count[0].find(f"{SVG}text").itertext()) == str(getattr(counts, word))


def test_legend_names_every_symbol(roadmap):
    root = ET.fromstring(render_svg(roadmap))
    legend = [g for g in root.iter(f"{SVG}g") if g.get("class") == "legend"][0]
    words = " ".join("".join(t.itertext()) for t in legend.iter(f"{SVG}text"))
    for phrase in ("Player wins", "Player loses", "Tie", "flush", "pair",
                   "top to bottom, then left to right"):
        assert phrase in words


def test_scales_by_viewbox_and_everything_is_inside_it(roadmap):
    root = ET.fromstring(render_svg(roadmap))
    assert root.get("width") is None and root.get("height") is None
    left, top, width, height = map(float, root.get("viewBox").split())
    assert (left, top) == (0, 0) and width > height > 0
    for circle in root.iter(f"{SVG}circle"):
        x, y, r = (float(circle.get(k)) for k in ("cx", "cy", "r"))
        assert r <= x <= width - r and r <= y <= height - r


def test_outside_text_is_escaped_and_the_xml_stays_valid(shoe_events):
    hostile_table = 'T1"><script>alert(1)</script>&\x07'
    events = copy.deepcopy(shoe_events)
    for event in events:
        event["table"] = hostile_table
    roadmap = Roadmap.from_events(events)
    title = "<b>Dispute #42</b> & 'quotes' \"too\" \x00\x1b]0;x\x07"
    for svg in (render_svg(roadmap), render_svg(roadmap, title=title)):
        root = ET.fromstring(svg)  # raises on any unescaped markup or forbidden character
        assert not [e for e in root.iter() if "script" in e.tag or e.tag.endswith("}b")]
    root = ET.fromstring(render_svg(roadmap, title=title))
    assert root.find(f"{SVG}title").text == title.replace("\x00", "\ufffd").replace(
        "\x1b", "\ufffd").replace("\x07", "\ufffd")
    default = ET.fromstring(render_svg(roadmap)).find(f"{SVG}title").text
    assert default == "Roadmap — shoe 1 · T1\"><script>alert(1)</script>&\ufffd"


def test_an_empty_roadmap_draws_empty_plates():
    root = ET.fromstring(render_svg(Roadmap()))
    assert beads_of(root) == []
    assert root.find(f"{SVG}title").text == "Roadmap — no shoe yet"
    assert len([g for g in root.iter(f"{SVG}g") if g.get("class") == "position"]) == 5


def test_a_long_shoe_grows_the_plates_and_stays_in_order():
    roadmap = many_rounds(40)  # more than six columns of six
    root = ET.fromstring(render_svg(roadmap))
    beads = [g for g in beads_of(root) if g.get("data-position") == "3"]
    assert [int(g.get("data-round")) for g in beads] == list(range(1, 41))
    xs = sorted({float(parts_of(g, "bead-body")[0].get("cx")) for g in beads})
    assert len(xs) == 7
    assert float(root.get("viewBox").split()[2]) > float(
        ET.fromstring(render_svg(many_rounds(30))).get("viewBox").split()[2])


@pytest.mark.slow
def test_in_chromium_every_label_sits_inside_its_panel_and_the_heading_clears_the_caption(
        roadmap, tmp_path):
    """Text widths only a browser knows: draw the SVG in real Chromium and measure."""
    sync_api = pytest.importorskip("playwright.sync_api")
    long_title = "Dispute file — table T-HALL-7 — " + "very long words " * 12
    path = tmp_path / "roadmap.svg"
    path.write_text(render_svg(roadmap, title=long_title), encoding="utf-8")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 520})
            page.goto(path.as_uri())
            found = page.evaluate("""() => {
                const box = e => { const r = e.getBoundingClientRect();
                                   return [r.left, r.top, r.right, r.bottom]; };
                const svg = document.documentElement;
                return {
                  svg: box(svg),
                  beads: document.querySelectorAll('g.bead').length,
                  heading: box(svg.querySelector('text.heading')),
                  caption: box(svg.querySelector('text.caption')),
                  legend: [...svg.querySelectorAll('g.legend text')].map(box),
                  panels: [...svg.querySelectorAll('g.position')].map(g => ({
                    panel: box(g.querySelector('rect')),
                    inner: [...g.querySelectorAll('text, circle')].map(box)})),
                };
            }""")
        finally:
            browser.close()
    assert found["beads"] == 5 * 24

    def inside(inner, outer):
        return (inner[0] >= outer[0] - 0.5 and inner[1] >= outer[1] - 0.5
                and inner[2] <= outer[2] + 0.5 and inner[3] <= outer[3] + 0.5)

    for panel in found["panels"]:
        assert all(inside(box, panel["panel"]) for box in panel["inner"]), panel
    assert found["heading"][2] < found["caption"][0]  # the long title was cut short
    assert all(inside(box, found["svg"]) for box in found["legend"])
    legend = sorted(found["legend"])
    assert all(a[2] < b[0] for a, b in zip(legend, legend[1:]))  # legend entries don't touch


def test_the_sample_in_the_docs_is_what_the_renderer_draws_for_seed_1(roadmap):
    """docs/roadmap-sample.svg is regenerated with the command in docs/roadmap.md."""
    sample = Path(__file__).resolve().parents[2] / "docs" / "roadmap-sample.svg"
    assert sample.read_text(encoding="utf-8") == render_svg(roadmap)


def test_the_module_draws_a_file_of_events_and_names_a_bad_line(tmp_path, shoe_events):
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in shoe_events), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "controller.display.roadmap_svg", str(events)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == render_svg(Roadmap.from_events(shoe_events))
    with events.open("a", encoding="utf-8") as out:
        out.write('{"type": "round_result", "seq": 99999, "shoe": 1, "round": 40}\n')
    bad = subprocess.run([sys.executable, "-m", "controller.display.roadmap_svg", str(events)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr == f"{events}:{len(shoe_events) + 1}: round_result seq 99999: data is " \
                         "missing or not an object\n"
