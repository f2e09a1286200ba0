"""The config loader: typed, bounded, strict; every error named by key path; exit 78."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.config import EX_CONFIG, ConfigError, load_config, parse_config
from controller.transports.http import HttpTransportSettings
from controller.transports.mqtt import MqttTransportSettings

REPO = Path(__file__).resolve().parent.parent


def base_config(tmp_path: Path) -> dict[str, Any]:
    return {
        "table": {"id": "T01", "betting_seconds": 12, "reveal": "button", "decks": 6},
        "state_dir": str(tmp_path / "state"),
        "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe", "reconnect_seconds": 1.5},
        "panel": {"driver": "line_panel", "url": "/dev/pokdeng/panel"},
        "control": {"socket": str(tmp_path / "control.sock"), "mode": "0660"},
        "transports": {
            "http": {"url": "https://backend.example/events", "secret_file": "/etc/secret",
                     "timeout_s": 3},
            "mqtt": {"host": "broker", "password_credential": "mqtt-pw"},
            "file": {"path": str(tmp_path / "events.jsonl")},
        },
        "logging": {"level": "debug", "format": "json"},
        "journal": {"retention_days": 7, "archive_dir": str(tmp_path / "archives")},
    }


def write(tmp_path: Path, data: Any, name: str = "table.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def test_good_config_reads_every_section(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, base_config(tmp_path)))
    assert config.table.id == "T01" and config.table.betting_seconds == 12.0
    assert config.table.reveal == "button" and config.table.decks == 6
    assert config.journal_path == str(tmp_path / "state" / "journal.sqlite")
    assert config.shoe.driver == "beetek"
    assert config.shoe.driver_options() == {"url": "/dev/pokdeng/shoe", "reconnect_seconds": 1.5}
    assert config.panel is not None and config.panel.driver == "line_panel"
    assert config.control.mode == 0o660
    assert config.http is not None and config.http.timeout_s == 3.0
    assert isinstance(config.http, HttpTransportSettings)  # the transport's own settings
    assert (config.http.secret_file, config.http.secret_credential) == ("/etc/secret", None)
    assert config.mqtt is not None and config.mqtt.port == 1883
    assert isinstance(config.mqtt, MqttTransportSettings)
    assert (config.mqtt.password_file, config.mqtt.password_credential) == (None, "mqtt-pw")
    assert config.mqtt.protocol == "3.1.1" and config.file_sink.batch_max == 500
    assert list(config.transports) == ["http", "mqtt", "file"]
    assert config.logging.level == "debug" and config.logging.format == "json"
    assert config.journal.archive and config.journal.retention_days == 7.0
    assert config.journal.archive_dir == str(tmp_path / "archives")
    settings = config.machine_settings()
    assert (settings.table_id, settings.betting_seconds, settings.reveal, settings.decks) == \
        ("T01", 12.0, "button", 6)


def test_defaults_follow_systemd_directories(tmp_path: Path) -> None:
    data = base_config(tmp_path)
    del data["state_dir"], data["control"], data["transports"], data["logging"], data["panel"]
    del data["journal"]
    data["table"] = {"id": "T9"}
    env = {"STATE_DIRECTORY": "/var/lib/pokdeng-table", "RUNTIME_DIRECTORY": "/run/pokdeng-table"}
    config = parse_config(data, "x", environ=env)
    assert config.state_dir == "/var/lib/pokdeng-table"
    assert config.control.socket == "/run/pokdeng-table/control.sock"
    assert config.table.betting_seconds == 15.0 and config.table.reveal == "auto"
    assert config.table.decks == 8 and config.panel is None
    assert config.http is None and config.mqtt is None and config.file_sink is None
    assert config.logging.level == "info" and config.logging.format == "auto"
    assert config.journal.archive and config.journal.retention_days == 30.0
    assert config.journal.archive_dir is None
    outside = parse_config(data, "x", environ={})
    assert outside.control.socket == "/var/lib/pokdeng-table/control.sock"


def test_example_config_is_valid_and_covers_every_option() -> None:
    config = load_config(REPO / "config" / "example.yaml")
    assert config.http and config.mqtt and config.file_sink and config.panel
    text = (REPO / "config" / "example.yaml").read_text()
    for key in ("betting_seconds", "reveal", "decks", "state_dir", "reconnect_seconds",
                "cut_card_frames", "registry", "silence_seconds", "vendor_id", "buttons",
                "pause_switch_bit", "debounce_ms", "socket", "group", "mode", "secret_file",
                "secret_credential", "ca_file", "verify_tls", "timeout_s", "batch_max",
                "backoff_initial_s", "backoff_max_s", "topic_prefix", "tls", "username",
                "password_credential", "password_file", "client_id", "keepalive", "level",
                "format", "archive", "retention_days", "archive_dir"):
        assert f"{key}:" in text, key


def test_every_error_is_listed_at_once(tmp_path: Path) -> None:
    data = base_config(tmp_path)
    data["table"].update(decks=0, colour="red")
    data["shoe"]["driver"] = "acme"
    data["transports"]["http"]["timeout_s"] = "abc"
    data["logging"]["level"] = "loud"
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, data))
    errors = caught.value.errors
    assert len(errors) == 5, errors
    assert 'transports.http.timeout_s: must be a number > 0 and <= 300, got "abc"' in errors
    report = caught.value.report()
    assert report.startswith(f"{tmp_path / 'table.yaml'}: 5 configuration errors:")


def test_every_driver_option_error_is_listed_under_its_key_path(tmp_path: Path) -> None:
    data = base_config(tmp_path)
    data["shoe"].update(baudrat=9600, sped=2)
    data["panel"] = {"driver": "hid_panel", "vendor_id": "0x16c0", "product_id": 1,
                     "buttons": {"reveal": 2}, "debounce_msec": 20}
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, data))
    errors = caught.value.errors
    assert [e.split(":")[0] for e in errors] == ["shoe.baudrat", "shoe.sped",
                                                  "panel.debounce_msec"], errors
    assert "known: buttons, debounce_ms," in errors[2]
    result = subprocess.run([sys.executable, "-m", "controller", "config", "check",
                             str(tmp_path / "table.yaml")], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == EX_CONFIG and "3 configuration errors" in result.stderr
    assert "  shoe.sped: unknown option; known: " in result.stderr


def test_transport_options_follow_the_settings_fields(tmp_path: Path) -> None:
    data = base_config(tmp_path)
    data["transports"]["mqtt"].update(protocol="5", publish_timeout_s=2.5, batch_max=20)
    data["transports"]["file"]["batch_max"] = 50
    config = load_config(write(tmp_path, data))
    assert (config.mqtt.protocol, config.mqtt.publish_timeout_s, config.mqtt.batch_max) == \
        ("5", 2.5, 20)
    assert config.file_sink.batch_max == 50
    data["transports"]["mqtt"].update(protocol="4", reconnect_max_s=0)
    data["transports"]["file"]["batch_max"] = 0
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, data))
    assert caught.value.errors == [
        'transports.mqtt.protocol: must be one of 3.1.1, 5; got "4"',
        "transports.mqtt.reconnect_max_s: must be a number > 0 and <= 3600, got 0",
        "transports.file.batch_max: must be an integer >= 1 and <= 10000, got 0"]


def _mutate(path: str, value: Any):
    """A change to the base config: set (or with value DELETE remove) a dotted key."""
    def apply(data: dict[str, Any]) -> Any:
        keys = path.split(".")
        node = data
        for key in keys[:-1]:
            node = node[key]
        if value is DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
        return data
    return apply


DELETE = object()

BROKEN = {
    "unknown top-level key": (_mutate("tabel", {"id": "x"}), "tabel: unknown option (a typo?)"),
    "unknown nested key": (_mutate("table.betting_secs", 3), "table.betting_secs: unknown option"),
    "wrong type": (_mutate("table.betting_seconds", "abc"),
                   'table.betting_seconds: must be a number >= 1 and <= 600, got "abc"'),
    "boolean for a number": (_mutate("table.betting_seconds", True),
                             "table.betting_seconds: must be a number >= 1 and <= 600, got true"),
    "out of range": (_mutate("table.decks", 9),
                     "table.decks: must be an integer >= 1 and <= 8, got 9"),
    "not a choice": (_mutate("table.reveal", "manual"),
                     'table.reveal: must be one of auto, button; got "manual"'),
    "missing required key": (_mutate("table.id", DELETE), "table.id: required, missing"),
    "missing section": (_mutate("shoe", DELETE), "shoe: required, missing"),
    "inline http secret": (_mutate("transports.http.secret", "hunter2"),
                           "transports.http.secret: secrets are not allowed inline"),
    "inline mqtt password": (_mutate("transports.mqtt.password", "hunter2"),
                             "transports.mqtt.password: secrets are not allowed inline"),
    "two secret sources": (_mutate("transports.http.secret_credential", "k"),
                           "transports.http.secret_file: give either secret_file or "
                           "secret_credential, not both"),
    "timeout not a number": (_mutate("transports.http.timeout_s", "abc"),
                             'transports.http.timeout_s: must be a number > 0 and <= 300, '
                             'got "abc"'),
    "unknown driver": (_mutate("shoe.driver", "acme"), 'shoe.driver: unknown driver "acme"'),
    "driver for the other device": (_mutate("shoe.driver", "line_panel"),
                                    'shoe.driver: "line_panel" drives the panel, not the shoe'),
    "driver option typo": (_mutate("shoe.baudrat", 9600),
                           "shoe.baudrat: unknown option; known: baudrate, cut_card_frames,"),
    "driver option out of range": (_mutate("shoe.reconnect_seconds", 0),
                                   "shoe.reconnect_seconds: expected a number >= 0.01, got 0"),
    "driver option of the wrong type": (_mutate("shoe.baudrate", "fast"),
                                        "shoe.baudrate: expected a positive whole number, "
                                        "got 'fast'"),
    "driver option missing": (_mutate("shoe.url", DELETE), "shoe.url: required: the serial port"),
    "panel option typo": (_mutate("panel.baud", 9600),
                          "panel.baud: unknown option; known: baudrate, debounce_ms,"),
    "panel option out of range": (_mutate("panel.debounce_ms", -1),
                                  "panel.debounce_ms: must be in 0..1000, got -1"),
    "negative retention": (_mutate("journal.retention_days", -1),
                           "journal.retention_days: must be a number >= 0 and <= 36500, got -1"),
    "archive switch not a boolean": (_mutate("journal.archive", "no"),
                                     'journal.archive: must be true or false, got "no"'),
    "relative state dir": (_mutate("state_dir", "state"),
                           'state_dir: must be an absolute path, got "state"'),
    "socket mode with execute bits": (_mutate("control.mode", 0o777),
                                      "control.mode: must be a socket mode from 0600 to 0666"),
    "section not a mapping": (_mutate("logging", "loud"),
                              'logging: must be a mapping of options, got "loud"'),
    "bad YAML syntax": ("table: {id: T01\nshoe: [\n", "YAML syntax error: line 2"),
    "empty file": ("", "the file is empty"),
    "top level is a list": ("- table\n- shoe\n", "the top level must be a mapping of sections"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_config_is_rejected_with_its_key_path(tmp_path: Path, case: str) -> None:
    change, expected = BROKEN[case]
    data = change if isinstance(change, str) else change(copy.deepcopy(base_config(tmp_path)))
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, data))
    assert any(expected in message for message in caught.value.errors), caught.value.errors


RUN_CASES = ["unknown nested key", "wrong type", "out of range", "missing required key",
             "inline http secret", "bad YAML syntax", "empty file", "unknown driver",
             "driver option typo", "timeout not a number", "missing section",
             "top level is a list"]


@pytest.mark.parametrize("case", RUN_CASES)
def test_daemon_exits_78_on_a_broken_config(tmp_path: Path, case: str) -> None:
    change, expected = BROKEN[case]
    data = change if isinstance(change, str) else change(copy.deepcopy(base_config(tmp_path)))
    path = write(tmp_path, data)
    result = subprocess.run([sys.executable, "-m", "controller", "run", "--config", str(path)],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            env={**os.environ, "NOTIFY_SOCKET": ""})
    assert result.returncode == EX_CONFIG, result.stderr
    assert expected in result.stderr
    assert str(path) in result.stderr
    assert not (tmp_path / "state").exists()  # nothing started, nothing written


def test_config_check_command(tmp_path: Path) -> None:
    good = write(tmp_path, base_config(tmp_path), "good.yaml")
    result = subprocess.run([sys.executable, "-m", "controller", "config", "check", str(good)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout and "table T01" in result.stdout
    data = base_config(tmp_path)
    data["table"]["decks"] = 9
    data["transports"]["http"]["secret"] = "x"
    bad = write(tmp_path, data, "bad.yaml")
    result = subprocess.run([sys.executable, "-m", "controller", "config", "check", str(bad)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == EX_CONFIG
    assert "2 configuration errors" in result.stderr
    assert "table.decks:" in result.stderr and "transports.http.secret:" in result.stderr
    missing = subprocess.run([sys.executable, "-m", "controller", "config", "check",
                              str(tmp_path / "nope.yaml")], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == EX_CONFIG and "cannot read the config file" in missing.stderr


def test_daemon_exits_78_when_a_secret_file_cannot_be_read(tmp_path: Path) -> None:
    data = base_config(tmp_path)
    data["transports"] = {"http": {"url": "https://127.0.0.1:9/events",
                                   "secret_file": str(tmp_path / "missing-secret")}}
    del data["panel"]
    path = write(tmp_path, data)
    result = subprocess.run([sys.executable, "-m", "controller", "run", "--config", str(path)],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "NOTIFY_SOCKET": ""})
    assert result.returncode == EX_CONFIG
    assert "secret_file: cannot read" in result.stdout + result.stderr
    assert "missing-secret" in result.stdout + result.stderr
