"""Node.js and tests/node's npm packages (canonicalize, ajv, @asyncapi/specs), or another
folder's (examples/node-receiver), installed from its lock file with ``npm ci`` when missing; a
test skips, saying why, where node is not installed or the packages cannot be installed (no
registry)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE_PACKAGES = ("canonicalize", "@asyncapi/specs", "ajv")


def node_packages(folder: Path = NODE_DIR, wanted: tuple[str, ...] = NODE_PACKAGES) -> Path:
    """``folder`` (tests/node) with its node_modules; pytest.skip when that cannot be had."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (Debian: apt-get install nodejs npm)")
    with (folder / "package.json").open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one npm ci at a time (test workers share the folder)
        if not all((folder / "node_modules" / name).is_dir() for name in wanted):
            npm = shutil.which("npm")
            if npm is None:
                pytest.skip(f"npm is not installed: {folder}'s packages cannot be installed")
            done = subprocess.run([npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"],
                                  cwd=folder, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                pytest.skip(f"npm ci in {folder} failed (no registry?): {done.stderr[-500:]}")
    return folder


def node(folder: Path = NODE_DIR, wanted: tuple[str, ...] = NODE_PACKAGES) -> str:
    """The node binary, ``folder``'s packages installed."""
    node_packages(folder, wanted)
    found = shutil.which("node")
    assert found is not None
    return found
