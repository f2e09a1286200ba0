"""Rules across transport options, refused alike by the config (exit 78, key path named) and
by the transports' settings: plain http://, MQTT signing without protocol 5, ca_file without
TLS; and MQTT's TLS default on port 8883."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.service.config.settings import EX_CONFIG, ConfigError, parse_config
from controller.transports import OptionConflict, create
from controller.transports.http import HttpTransportSettings
from controller.transports.mqtt import MQTT_TLS_PORT, MqttTransportSettings
from support.daemon_helpers import control_section

PLAIN_HTTP = {"url": "http://127.0.0.1:9/events", "secret_file": "/etc/pokdeng/secret"}


def config(tmp_path: Path, transports: dict[str, Any]) -> dict[str, Any]:
    return {"table": {"id": "T01"}, "state_dir": str(tmp_path / "state"),
            "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe"},
            "control": control_section(tmp_path / "control.sock"), "transports": transports}


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


@pytest.mark.slow
def test_config_check_and_run_exit_78_on_plain_http(tmp_path):
    checked = run_cli(tmp_path, {"http": PLAIN_HTTP}, "config", "check")
    assert checked.returncode == EX_CONFIG
    assert "transports.http.url: plain http://" in checked.stderr
    ran = run_cli(tmp_path, {"http": PLAIN_HTTP}, "run", "--config")
    assert ran.returncode == EX_CONFIG and "transports.http.url: plain http://" in ran.stderr
    assert not (tmp_path / "state").exists()  # nothing started
    secret = tmp_path / "backend.secret"  # config check reads it, as run does
    secret.write_text("s3cret\n")
    allowed = run_cli(tmp_path, {"http": {**PLAIN_HTTP, "secret_file": str(secret),
                                          "allow_insecure": True}}, "config", "check")
    assert allowed.returncode == 0, allowed.stderr


def test_mqtt_signing_needs_protocol_5(tmp_path):
    signed = {"host": "broker", "secret_credential": "backend-secret"}
    assert errors(tmp_path, {"mqtt": signed}) == [
        'transports.mqtt.protocol: signed messages carry their signature as MQTT 5 user '
        'properties: set protocol: "5" (or give no secret_file/secret_credential)']
    read = parse_config(config(tmp_path, {"mqtt": {**signed, "protocol": "5"}}))
    assert (read.mqtt.secret_file, read.mqtt.secret_credential) == (None, "backend-secret")
    checked = run_cli(tmp_path, {"mqtt": signed}, "config", "check")
    assert checked.returncode == EX_CONFIG and "transports.mqtt.protocol:" in checked.stderr
    assert errors(tmp_path, {"mqtt": {**signed, "secret": "inline"}})[0].startswith(
        "transports.mqtt.secret: secrets are not allowed inline")


@pytest.mark.parametrize("port, tls, on", [(MQTT_TLS_PORT, None, True), (1883, None, False),
                                           (MQTT_TLS_PORT, False, False), (1883, True, True),
                                           (18883, None, False)])
def test_mqtt_tls_is_on_by_default_only_on_port_8883(tmp_path, port, tls, on):
    assert MqttTransportSettings("broker", port, tls=tls).use_tls is on
    options = {"host": "broker", "port": port} | ({} if tls is None else {"tls": tls})
    assert parse_config(config(tmp_path, {"mqtt": options})).mqtt.use_tls is on


def test_mqtt_ca_file_needs_tls(tmp_path):
    ca = {"host": "broker", "ca_file": "/etc/pokdeng/ca.pem"}
    assert errors(tmp_path, {"mqtt": {**ca, "port": MQTT_TLS_PORT}}) == []
    assert errors(tmp_path, {"mqtt": {**ca, "port": 1883, "tls": True}}) == []
    assert errors(tmp_path, {"mqtt": ca}) == [
        "transports.mqtt.ca_file: given but TLS is off (tls is false, or unset with a port "
        "other than 8883)"]
    assert errors(tmp_path, {"mqtt": {**ca, "port": MQTT_TLS_PORT, "tls": False}})[0] \
        .startswith("transports.mqtt.ca_file: given but TLS is off")
