"""What the Debian package's venv gets, checked without building the package (no root, no
containers): the wheel pokdeng-table builds holds every file the program reads besides its
code (the screens' catalogues and pages, the event schemas), and constraints.txt pins every
dependency pyproject.toml declares, with a hash (packaging/build-deb installs with
--require-hashes: a missing pin stops the build)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_the_catalogues_pages_and_schemas(tmp_path: Path) -> None:
    source = tmp_path / "src"  # a copy: building writes build/ and egg-info beside the sources
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "node_modules", "__pycache__", "*.egg-info", "build", "docs", "tests"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-q", "-w", str(tmp_path / "w"),
                           str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    wheel = next((tmp_path / "w").glob("pokdeng_table-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for directory, pattern in (("controller/display/locales", "*.po"),
                               ("controller/display/static", "*"),
                               ("controller/table/schemas", "*.json")):
        files = sorted((REPO / directory).glob(pattern))
        assert files, directory
        for path in files:
            assert f"{directory}/{path.name}" in names, f"the wheel lacks {directory}/{path.name}"


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_dependency_is_pinned_with_a_hash() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    text = (REPO / "packaging" / "constraints.txt").read_text()
    pins = {m.group(1).lower().replace("_", "-"): m.group(2) for m in re.finditer(
        r"^([A-Za-z0-9._-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)",
        text, re.M)}
    missing = sorted({_name(r) for r in declared} - set(pins))
    assert not missing, f"constraints.txt pins no {missing}"
