"""Fixtures shared by the tests that run the daemon as a real subprocess."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from support.control_helpers import NOBODY, TemporaryGroup
from support.daemon_helpers import LinePanelPty
from drivers.sim.shoe import ShoeSimulator


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A fresh directory for the daemon's files; Unix socket paths are limited to 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="pdt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def devices(short_dir: Path) -> Iterator[tuple[ShoeSimulator, LinePanelPty]]:
    shoe = ShoeSimulator(short_dir / "shoe", "beetek")
    shoe.start()
    panel = LinePanelPty()
    yield shoe, panel
    shoe.close(drain_timeout=0.2)
    panel.close()


@pytest.fixture
def supervisors() -> Iterator[TemporaryGroup]:
    """A supervisor group for the test, with nobody as a member (in the user database)."""
    group = TemporaryGroup(f"pdt-sup-{os.getpid()}", members=(NOBODY.pw_name,))
    yield group
    group.remove()
