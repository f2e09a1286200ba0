"""``pokdeng-table read-panel`` as a real subprocess, against a serial line panel on a pty."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
WAIT = 10.0


def read_panel(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "controller", "read-panel", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def expect(master: int, token: bytes) -> None:
    got = b""
    deadline = time.monotonic() + WAIT
    while token not in got:
        assert time.monotonic() < deadline, f"never got {token!r}; got {got!r}"
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            got += os.read(master, 1024)


def json_lines(proc: subprocess.Popen, n: int) -> list[dict]:
    lines = []
    for _ in range(n):
        line = proc.stdout.readline()
        assert line, f"read-panel ended early; stderr: {proc.stderr.read()}"
        lines.append(json.loads(line))
    return lines


def test_read_panel_prints_a_line_panel_as_table_script(tmp_path):
    master, slave = pty.openpty()
    try:
        proc = read_panel("--line", os.ttyname(slave))
        try:
            expect(master, b"status?\n")
            os.write(master, b"switch pause on\nnonsense\nstart_round\n")
            lines = json_lines(proc, 3)
        finally:
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=WAIT)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0
    assert [{k: v for k, v in line.items() if k != "at"} for line in lines] == [
        {"kind": "device", "name": "panel", "connected": True},
        {"kind": "switch", "name": "pause", "on": True},
        {"kind": "button", "name": "start_round"},
    ]
    assert "ignored a line: unknown line 'nonsense'" in stderr
    assert "stopped;" in stderr and "presses 1" in stderr


def test_read_panel_uses_the_panel_section_of_a_table_config(tmp_path):
    config = yaml.safe_load((REPO / "config" / "example.yaml").read_text())
    config["panel"] = {"driver": "line_panel", "url": str(tmp_path / "absent"), "baud": 9600}
    path = tmp_path / "table.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = read_panel("--config", str(path))
    _, stderr = proc.communicate(timeout=WAIT)
    assert proc.returncode == 2
    assert "panel.baud: unknown option; known: baudrate" in stderr


def test_read_panel_rejects_bad_usb_ids():
    proc = read_panel("--usb", "acme")
    _, stderr = proc.communicate(timeout=WAIT)
    assert proc.returncode == 2 and "--usb takes VID:PID" in stderr
