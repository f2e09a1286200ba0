"""A child of the daemon runs the package's code, never a ``controller/`` planted in the
folder the daemon was started from (controller/python_child.py): a real interpreter, started
in such a folder, as the screen process and the journal check are."""

from __future__ import annotations

import subprocess
from pathlib import Path

from controller.python_child import python_module

PLANTED = """
import pathlib
pathlib.Path(__file__).parent.parent.joinpath("planted-ran").write_text("yes")
"""


def test_a_controller_planted_in_the_working_folder_is_not_run(tmp_path: Path) -> None:
    planted = tmp_path / "controller"
    planted.mkdir()
    (planted / "__init__.py").write_text(PLANTED)
    (planted / "python_child.py").write_text(PLANTED)
    done = subprocess.run([*python_module("controller.python_child")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "planted-ran").exists()


def test_without_it_python_would_have_run_the_planted_code(tmp_path: Path) -> None:
    """The attack above is real: plain ``python -m`` from that folder runs the planted file."""
    planted = tmp_path / "controller"
    planted.mkdir()
    (planted / "__init__.py").write_text(PLANTED)
    (planted / "python_child.py").write_text("")
    command = [arg for arg in python_module("controller.python_child") if arg != "-P"]
    subprocess.run(command, cwd=tmp_path, capture_output=True, timeout=60, check=True)
    assert (tmp_path / "planted-ran").read_text() == "yes"
