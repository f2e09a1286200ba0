"""The ``cli`` part of ``pokdeng-table bench`` (bench/cli_bench.py): every command it times ran,
against a real daemon, and shows up in the one table. No time is asserted: the figures are
for docs/benchmarks.md; tests/commands/test_cli_imports.py holds what makes them small."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.report import PARTS


@pytest.mark.slow
def test_bench_times_each_command_against_the_interpreter(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    others = ",".join(part for part in PARTS if part != "cli")
    done = subprocess.run([sys.executable, "-m", "controller", "bench", "--skip", others,
                           "--json", str(out)], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = {row["figure"]: row for row in json.loads(out.read_text())}
    assert set(figures) == {"python -c pass", "pokdeng-table --version",
                            "pokdeng-table status --json", "pokdeng-table replay (one shoe)",
                            "pokdeng-table rtp --json", "python -c pass, again"}
    for figure, row in figures.items():
        assert figure in done.stdout
        low, middle, high = (float(ms) for ms in row["value"].removesuffix(" ms").split(" / "))
        assert 0 < low <= middle <= high
        assert "whole process, min / median / max of 5" in row["note"]
    assert "x1.0 python -c pass" in figures["python -c pass"]["note"]
    for ratio_goal in ("pokdeng-table --version", "pokdeng-table status --json"):
        # judged on the five rounds as pairs against the interpreter against itself
        assert re.search(r"goal <= x3: (met|not met|cannot tell on this machine) \(A/A floor "
                         r"x[\d.]+-[\d.]+; 5 pairs x", figures[ratio_goal]["note"])
    assert "goal < 0.2 s" in figures["pokdeng-table replay (one shoe)"]["note"]
