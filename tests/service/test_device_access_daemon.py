"""A device node the daemon may not open (EPERM, as a unit's device allow-list that lacks the
node's major makes it) is named in `status` and the health message with its path and errno,
and the device opens, without a restart, as soon as the path leads to one it may open.

The EPERM is the kernel's own: the link leads to an immutable file (chattr +i), which no one,
root included, may open for writing. Then the link is re-pointed to the simulated shoe's pty,
as udev re-points /dev/pokdeng/shoe."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.service.control.client import ControlClient
from controller.service.status_board import status_line
from controller.service.telemetry.health import health_message
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    cli,
    daemon_config,
    running_daemon,
    wait_status,
)
from support.health_helpers import health_validator


@pytest.fixture
def refused_node(short_dir: Path) -> Iterator[Path]:
    """An immutable file: opening it for reading and writing fails with EPERM."""
    node = short_dir / "refused-node"
    node.write_bytes(b"")
    made = subprocess.run(["chattr", "+i", str(node)], capture_output=True, text=True)
    if shutil.which("chattr") is None or made.returncode != 0:
        pytest.skip(f"cannot make an immutable file here (chattr: {made.stderr.strip()})")
    yield node
    subprocess.run(["chattr", "-i", str(node)], check=True)


def test_a_shoe_node_the_daemon_may_not_open_is_named_with_eperm_and_opens_once_allowed(
        short_dir: Path, refused_node: Path) -> None:
    link = short_dir / "shoe"
    link.symlink_to(refused_node)
    panel = LinePanelPty()
    config = daemon_config(short_dir, link, panel.path, betting_seconds=600)
    client = ControlClient(str(short_dir / "control.sock"))
    try:
        with running_daemon(config, short_dir, panel) as (_proc, log):
            status = wait_status(client, lambda s: s["devices"].get("shoe") is False
                                 and "shoe" in (s.get("device_problems") or {}))
            problem = status["device_problems"]["shoe"]
            assert str(link) in problem and f"-> {refused_node}" in problem
            assert "EPERM (Operation not permitted)" in problem and "DeviceAllow=" in problem
            assert "panel" not in status["device_problems"]  # the panel opened

            shown = cli("status", "--socket", str(short_dir / "control.sock"))
            assert shown.returncode == 0, shown.stderr
            assert f"shoe: {problem}" in shown.stdout.splitlines()
            assert f"shoe: {problem}" in status_line(status)  # systemd's STATUS= line
            health = health_message(status, {}, {"bytes": 0, "records": 0})
            health_validator().validate(health)
            assert health["device_problems"] == {"shoe": problem}
            assert health["devices"]["shoe"] is False
            assert "EPERM" in log.read_text()  # the log's retry line says it too

            # udev points the name at the real device: it opens, no restart
            shoe = ShoeSimulator(link, "beetek").start()
            try:
                status = wait_status(client, lambda s: s["devices"].get("shoe") is True)
                assert status["device_problems"] == {}
            finally:
                shoe.close()
    finally:
        panel.close()
