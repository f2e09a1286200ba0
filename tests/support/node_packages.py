"""Node.js and tests/node's npm packages (canonicalize, ajv, @asyncapi/specs), installed from its
lock file with ``npm ci`` when missing; a test skips, saying why, where node is not installed
or the packages cannot be installed (no registry)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "node"


def node_packages() -> Path:
    """tests/node with its node_modules; pytest.skip when that cannot be had."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (Debian: apt-get install nodejs npm)")
    wanted = ("canonicalize", "@asyncapi/specs", "ajv")
    with (NODE_DIR / "package.json").open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one npm ci at a time (test workers share the folder)
        if not all((NODE_DIR / "node_modules" / name).is_dir() for name in wanted):
            npm = shutil.which("npm")
            if npm is None:
                pytest.skip("npm is not installed: tests/node's packages cannot be installed")
            done = subprocess.run([npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"],
                                  cwd=NODE_DIR, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                pytest.skip(f"npm ci in {NODE_DIR} failed (no registry?): {done.stderr[-500:]}")
    return NODE_DIR


def node() -> str:
    node_packages()
    found = shutil.which("node")
    assert found is not None
    return found
