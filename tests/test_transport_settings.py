"""Rules across transport options, refused alike by the config (exit 78, key path named) and
by the transports' settings: plain http://."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.config import EX_CONFIG, ConfigError, parse_config
from controller.transports import OptionConflict, create
from controller.transports.http import HttpTransportSettings

PLAIN_HTTP = {"url": "http://127.0.0.1:9/events", "secret_file": "/etc/pokdeng/secret"}


def config(tmp_path: Path, transports: dict[str, Any]) -> dict[str, Any]:
    return {"table": {"id": "T01"}, "state_dir": str(tmp_path / "state"),
            "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe"},
            "control": {"socket": str(tmp_path / "control.sock")}, "transports": transports}


def errors(tmp_path: Path, transports: dict[str, Any]) -> list[str]:
    try:
        parse_config(config(tmp_path, transports), "table.yaml")
    except ConfigError as exc:
        return exc.errors
    return []


def run_cli(tmp_path: Path, transports: dict[str, Any],
            *command: str) -> subprocess.CompletedProcess:
    path = tmp_path / "table.yaml"
    path.write_text(yaml.safe_dump(config(tmp_path, transports)), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "controller", *command, str(path)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "NOTIFY_SOCKET": ""})


def test_plain_http_is_refused_unless_allowed(tmp_path):
    assert errors(tmp_path, {"http": PLAIN_HTTP}) == [
        "transports.http.url: plain http:// lets anyone on the network path read and alter "
        "what this table sends; use https://, or set allow_insecure: true (a backend on this "
        "machine or in a test only)"]
    assert errors(tmp_path, {"http": {**PLAIN_HTTP, "allow_insecure": True}}) == []
    assert errors(tmp_path, {"http": {**PLAIN_HTTP, "url": "https://127.0.0.1:9/e"}}) == []
    with pytest.raises(OptionConflict, match="http transport: url: plain http://"):
        HttpTransportSettings("HTTP://backend/events", "/etc/pokdeng/secret")
    with pytest.raises(OptionConflict, match="allow_insecure"):
        create("http", PLAIN_HTTP, table="T01")


def test_config_check_and_run_exit_78_on_plain_http(tmp_path):
    checked = run_cli(tmp_path, {"http": PLAIN_HTTP}, "config", "check")
    assert checked.returncode == EX_CONFIG
    assert "transports.http.url: plain http://" in checked.stderr
    ran = run_cli(tmp_path, {"http": PLAIN_HTTP}, "run", "--config")
    assert ran.returncode == EX_CONFIG and "transports.http.url: plain http://" in ran.stderr
    assert not (tmp_path / "state").exists()  # nothing started
    allowed = run_cli(tmp_path, {"http": {**PLAIN_HTTP, "allow_insecure": True}},
                      "config", "check")
    assert allowed.returncode == 0, allowed.stderr
