"""What ``pokdeng-table bench`` prints and what its ``--json`` holds are the same floors and
words, and every ratio it prints stands on its A/A floor (the ``cli`` part: real processes,
a real daemon for ``status``)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

from bench.report import PARTS

RATIO = re.compile(r"x(?P<ratio>[\d.]+) python -c pass")
PAIRS = re.compile(r"\d+ pairs (?P<pairs>x[\d.]+(?:, x[\d.]+)*)\)")


def test_the_cli_rows_show_their_floor_and_json_says_the_same(tmp_path: Path) -> None:
    others = ",".join(part for part in PARTS if part != "cli")
    figures = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, "-m", "controller", "bench", "--skip", others,
                           "--json", str(figures)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(figures.read_text())
    printed = done.stdout
    judged = 0
    for row in rows:
        # the text table's line of this figure ends in the very note the JSON holds
        line = next(line for line in printed.splitlines() if line.startswith(row["figure"]))
        assert line.rstrip().endswith(row["note"])
        ratio = RATIO.search(row["note"])
        assert ratio, row
        assert "A/A floor x" in row["note"], row  # no ratio without its floor
        if pairs := PAIRS.search(row["note"]):
            judged += 1
            # the ratio shown is the one the word is about: the median pair
            median = statistics.median(float(x) for x in
                                       pairs["pairs"].replace("x", "").split(", "))
            assert abs(float(ratio["ratio"]) - median) <= 0.006, row
    assert judged == 2  # --version and status --json
