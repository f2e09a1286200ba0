"""The config loader: typed, bounded, strict; every error named by key path; exit 78."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.service.config.settings import EX_CONFIG, ConfigError, load_config, parse_config
from controller.service.config.yaml_reader import YamlProblems, load_yaml
from controller.service.control.access import own_group
from controller.transports.http import HttpTransportSettings
from controller.transports.mqtt import MqttTransportSettings

REPO = Path(__file__).resolve().parents[2]


def base_config(tmp_path: Path) -> dict[str, Any]:
    """A good config whose secrets exist: a file, and a credential in ``credentials_env``."""
    (tmp_path / "backend.secret").write_text("s3cret\n")
    (tmp_path / "credentials").mkdir(exist_ok=True)
    (tmp_path / "credentials" / "mqtt-pw").write_text("pw")
    return {
        "table": {"id": "T01", "betting_seconds": 12, "reveal": "button", "decks": 6},
        "state_dir": str(tmp_path / "state"),
        "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe", "reconnect_seconds": 1.5},
        "panel": {"driver": "line_panel", "url": "/dev/pokdeng/panel"},
        "control": {"socket": str(tmp_path / "control.sock"), "mode": "0660",
                    "supervisor_group": own_group()},
        "transports": {
            "http": {"url": "https://backend.example/events",
                     "secret_file": str(tmp_path / "backend.secret"), "timeout_s": 3},
            "mqtt": {"host": "broker", "password_credential": "mqtt-pw"},
            "file": {"path": str(tmp_path / "events.jsonl")},
        },
        "logging": {"level": "debug", "format": "json"},
        "journal": {"retention_days": 7, "archive_dir": str(tmp_path / "archives")},
    }


def credentials_env(tmp_path: Path) -> dict[str, str]:
    """What systemd's LoadCredential= hands the daemon, for the base config's credential."""
    return {**os.environ, "CREDENTIALS_DIRECTORY": str(tmp_path / "credentials"),
            "NOTIFY_SOCKET": ""}


def write(tmp_path: Path, data: Any, name: str = "table.yaml") -> Path:
    path = tmp_path / name
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def test_good_config_reads_every_section(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, base_config(tmp_path)))
    assert config.table.table_id == "T01" and config.table.betting_seconds == 12.0
    assert config.table.reveal == "button" and config.table.decks == 6
    assert config.journal_path == str(tmp_path / "state" / "journal.sqlite")
    assert config.shoe.driver == "beetek"
    assert config.shoe.driver_options() == {"url": "/dev/pokdeng/shoe", "reconnect_seconds": 1.5}
    assert config.panel is not None and config.panel.driver == "line_panel"
    assert config.control.mode == 0o660
    assert config.http is not None and config.http.timeout_s == 3.0
    assert isinstance(config.http, HttpTransportSettings)  # the transport's own settings
    assert (config.http.secret_file, config.http.secret_credential) == \
        (str(tmp_path / "backend.secret"), None)
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
    assert config.realtime_priority == 0  # the normal priority unless asked
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
                "format", "archive", "retention_days", "archive_dir", "allow_insecure",
                "supervisor_group", "max_clients", "protocol", "key_credential",
                "realtime_priority", "wal_kib"):
        assert f"{key}:" in text, key
    assert config.realtime_priority == 10


@pytest.mark.parametrize("value, error", [
    (51, "realtime_priority: must be an integer >= 0 and <= 50, got 51"),
    (-1, "realtime_priority: must be an integer >= 0 and <= 50, got -1"),
    ("high", 'realtime_priority: must be an integer >= 0 and <= 50, got "high"'),
])
def test_a_real_time_priority_out_of_range_is_refused(tmp_path: Path, value: object,
                                                      error: str) -> None:
    data = base_config(tmp_path)
    data["realtime_priority"] = value
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, data))
    assert caught.value.errors == [error]


def test_the_journals_wal_size_is_read_in_kib_and_bounded(tmp_path: Path) -> None:
    data = base_config(tmp_path)
    assert load_config(write(tmp_path, data)).wal_bytes == 4 * 1024 * 1024
    data["journal"] = {**data.get("journal", {}), "wal_kib": 256}
    assert load_config(write(tmp_path, data)).wal_bytes == 256 * 1024
    data["journal"]["wal_kib"] = 8
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, data))
    assert caught.value.errors == ["journal.wal_kib: must be an integer >= 64 and <= 262144, "
                                   "got 8"]


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
    data["transports"]["mqtt"].update(protocol="5", publish_timeout_s=2.5, batch_max=20,
                                      in_flight_batches=8)
    data["transports"]["file"]["batch_max"] = 50
    config = load_config(write(tmp_path, data))
    assert (config.mqtt.protocol, config.mqtt.publish_timeout_s, config.mqtt.batch_max,
            config.mqtt.in_flight_batches) == ("5", 2.5, 20, 8)
    assert config.file_sink.batch_max == 50
    data["transports"]["mqtt"].update(protocol="4", reconnect_max_s=0, in_flight_batches=0)
    data["transports"]["file"]["batch_max"] = 0
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, data))
    assert caught.value.errors == [
        'transports.mqtt.protocol: must be one of 3.1.1, 5; got "4"',
        "transports.mqtt.in_flight_batches: must be an integer >= 1 and <= 64, got 0",
        "transports.mqtt.reconnect_max_s: must be a number > 0 and <= 3600, got 0",
        "transports.file.batch_max: must be an integer >= 1 and <= 10000, got 0"]


Make = Callable[[Path], Path]  # writes a broken config under tmp_path, returns its path
DELETE = object()
MEMORY_LIMIT = 512 * 1024 * 1024
TIME_LIMIT_S = 30  # bounds a hang; a refusal takes well under a second


def changed(key: str, value: Any) -> Make:
    """The base config with a dotted key set (or removed, with DELETE)."""
    def make(tmp_path: Path) -> Path:
        data = base_config(tmp_path)
        *parents, last = key.split(".")
        node = data
        for parent in parents:
            node = node[parent]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
        return write(tmp_path, data)
    return make


def edited(old: str, new: str) -> Make:
    """The base config's YAML text with one piece of text replaced (what a dict cannot hold)."""
    def make(tmp_path: Path) -> Path:
        text = yaml.safe_dump(base_config(tmp_path), sort_keys=False)
        assert old in text
        return write(tmp_path, text.replace(old, new, 1))
    return make


def text(yaml_text: str) -> Make:
    return lambda tmp_path: write(tmp_path, yaml_text)


def written(data: bytes) -> Make:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "table.yaml"
        path.write_bytes(data)
        return path
    return make


def huge_file(tmp_path: Path) -> Path:
    """The base config followed by 200 MB of comments: valid YAML, just far too much of it."""
    path = write(tmp_path, base_config(tmp_path))
    block = ("# " + "x" * 1021 + "\n").encode() * 1024  # 1 MiB
    with open(path, "ab") as out:
        for _ in range(200):
            out.write(block)
    return path


ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def secret_file(content: str) -> Make:
    def make(tmp_path: Path) -> Path:
        path = changed("transports.http.secret_file", str(tmp_path / "other.secret"))(tmp_path)
        (tmp_path / "other.secret").write_text(content)
        return path
    return make


def http_credential(name: str | None) -> Make:
    """The HTTP secret as a systemd credential (the installed way) instead of a file."""
    def make(tmp_path: Path) -> Path:
        data = base_config(tmp_path)
        del data["transports"]["http"]["secret_file"]
        data["transports"]["http"]["secret_credential"] = name
        return write(tmp_path, data)
    return make


def journal_key_file(content: str, also_credential: bool = False) -> Make:
    def make(tmp_path: Path) -> Path:
        data = base_config(tmp_path)
        data["journal"]["key_file"] = str(tmp_path / "journal.key")
        if also_credential:
            data["journal"]["key_credential"] = "journal-key"
        (tmp_path / "journal.key").write_text(content)
        return write(tmp_path, data)
    return make


def empty_credential(tmp_path: Path) -> Path:
    path = write(tmp_path, base_config(tmp_path))
    (tmp_path / "credentials" / "mqtt-pw").write_text("\n")
    return path


#: broken config -> (how to make it, what the message must say: its key path or its line)
BROKEN: dict[str, tuple[Make, str]] = {
    # the file itself
    "200 MB file": (huge_file, "the file is larger than 1024 KiB"),
    "alias bomb": (text(ALIAS_BOMB), "YAML: line 1, column 4: anchors and aliases (&a, *a) "
                                     "are not allowed"),
    "alias inside a section": (edited("  decks: 6\n", "  decks: &six 6\n"),
                               "YAML: line 5, column 10: anchors and aliases"),
    "5,001-digit number": (edited("betting_seconds: 12", "betting_seconds: " + "1" * 5001),
                           "table.betting_seconds: a number of 5001 characters; at most 32"),
    "5,001-digit number in a driver option": (
        edited("reconnect_seconds: 1.5", "reconnect_seconds: 9" + "0" * 5000),
        "shoe.reconnect_seconds: a number of 5001 characters"),
    "duplicate top-level section": (edited("logging:\n", "table: {id: T02}\nlogging:\n"),
                                    "table: given twice, on lines 1 and 28"),
    "duplicate nested key": (edited("  id: T01\n", "  id: T01\n  id: T02\n"),
                             "table.id: given twice, on lines 2 and 3"),
    "duplicate key three levels down": (
        edited("    timeout_s: 3\n", "    timeout_s: 3\n    timeout_s: 30\n"),
        "transports.http.timeout_s: given twice, on lines 22 and 23"),
    "python object tag": (edited("  id: T01\n", "  id: !!python/object/apply:os.system "
                                               "['touch pwned']\n"),
                          "YAML: line 2, column 7: YAML tags "
                          "(tag:yaml.org,2002:python/object/apply:os.system) are not allowed"),
    "binary tag": (edited("  id: T01\n", "  id: !!binary aGVsbG8=\n"), "YAML: line 2"),
    "nesting 100,000 deep": (text("table: " + "[" * 100_000 + "]" * 100_000 + "\n"),
                             "YAML: line 1, column 39: nested deeper than 32 levels"),
    "20,000 values": (edited("  reconnect_seconds: 1.5\n", "  reconnect_seconds: 1.5\n"
                             "  cut_card_frames: [" + "x, " * 20_000 + "]\n"),
                      "YAML: line 11, column 29952: more than 10000 values"),
    "not UTF-8": (written(b"table:\n  id: T\xff01\n"), "not UTF-8 text: invalid start byte at "
                                                     "byte 14"),
    "NUL byte": (written(b"table:\n  id: T01\x00\n"),
                 "YAML: line 2: character #x0000 is not allowed"),
    "bad YAML syntax": (text("table: {id: T01\nshoe: [\n"), "YAML syntax error: line 2"),
    "two documents": (text("table: {id: T01}\n---\ntable: {id: T02}\n"),
                      "YAML syntax error: line 2, column 1: but found another document"),
    "empty file": (text(""), "the file is empty"),
    "top level is a list": (text("- table\n- shoe\n"), "the top level must be a mapping"),
    "a list as an option name": (edited("  decks: 6\n", "  ? [decks]\n  : 6\n"),
                                 "table: option names must be text, got a list (line 5)"),
    "number YAML cannot build": (edited("decks: 6", "decks: 0x_"),
                                 "table.decks: YAML cannot read this value (line 5)"),
    "date YAML cannot build": (edited("id: T01", "id: 2024-13-45"),
                               "table.id: YAML cannot read this value (line 2): month must be"),
    "option names as written": (edited("logging:\n", "yes: true\nlogging:\n"),
                                "yes: unknown option (a typo?)"),
    "a very long value is cut short": (changed("table.id", "T" * 100_000),
                                       'table.id: must be 1-32 letters, digits, \'_\', \'.\', '
                                       '\'-\' starting with a letter or digit, got "TTTT'),
    "thousands of errors are cut short": (
        edited("logging:\n", "".join(f"typo{i}: 1\n" for i in range(3000)) + "logging:\n"),
        "… and 2950 more"),
    # the schema
    "unknown top-level key": (changed("tabel", {"id": "x"}), "tabel: unknown option (a typo?)"),
    "unknown nested key": (changed("table.betting_secs", 3), "table.betting_secs: unknown option"),
    "wrong type": (changed("table.betting_seconds", "abc"),
                   'table.betting_seconds: must be a number >= 1 and <= 600, got "abc"'),
    "boolean for a number": (changed("table.betting_seconds", True),
                             "table.betting_seconds: must be a number >= 1 and <= 600, got true"),
    "not a number (.nan)": (edited("betting_seconds: 12", "betting_seconds: .nan"),
                            "table.betting_seconds: must be a number >= 1 and <= 600, got nan"),
    "infinity": (edited("timeout_s: 3", "timeout_s: .inf"),
                 "transports.http.timeout_s: must be a number > 0 and <= 300, got inf"),
    "out of range": (changed("table.decks", 9),
                     "table.decks: must be an integer >= 1 and <= 8, got 9"),
    "not a choice": (changed("table.reveal", "manual"),
                     'table.reveal: must be one of auto, button; got "manual"'),
    "missing required key": (changed("table.id", DELETE), "table.id: required, missing"),
    "missing section": (changed("shoe", DELETE), "shoe: required, missing"),
    # logins derived from the table id
    "table id that is another table's health login": (
        changed("table.id", "T01-health"),
        'table.id: "T01-health" is the health topic\'s login and client id of the table whose '
        'table id is "T01" (<table id>-health'),
    "mqtt username that is another table's health login": (
        changed("transports.mqtt.username", "T02-health"),
        'transports.mqtt.username: "T02-health" is the health topic\'s login and client id of '
        'the table whose login is "T02"'),
    "mqtt health login the same as the table's": (
        edited("    password_credential: mqtt-pw\n", "    password_credential: mqtt-pw\n"
               "    username: T01\n    health_username: T01\n"),
        'transports.mqtt.health_username: "T01" is also the login of the event connection '
        "(username)"),
    "mqtt client id that is another table's health connection": (
        changed("transports.mqtt.client_id", "pokdeng-table-T02-health"),
        'transports.mqtt.client_id: "pokdeng-table-T02-health" is the client id of the health '
        'connection of "pokdeng-table-T02"'),
    # the studio broker's own logins (config/mosquitto/pokdeng.acl)
    "table id that is the game backend's login": (
        changed("table.id", "backend"),
        'table.id: "backend" is the game backend\'s login and client id'),
    "table id that is the fleet view's login": (
        changed("table.id", "fleet"),
        'table.id: "fleet" is the studio fleet view\'s login and client id'),
    "mqtt username that is the game backend's login": (
        changed("transports.mqtt.username", "backend"),
        'transports.mqtt.username: "backend" is the game backend\'s login'),
    "mqtt client id that is the game backend's": (
        changed("transports.mqtt.client_id", "backend"),
        'transports.mqtt.client_id: "backend" is the game backend\'s login and client id'),
    "mqtt health login that is the fleet view's": (
        changed("transports.mqtt.health_username", "fleet"),
        'transports.mqtt.health_username: "fleet" is the studio fleet view\'s login'),
    "section not a mapping": (changed("logging", "loud"),
                              'logging: must be a mapping of options, got "loud"'),
    "relative state dir": (changed("state_dir", "state"),
                           'state_dir: must be an absolute path, got "state"'),
    "negative retention": (changed("journal.retention_days", -1),
                           "journal.retention_days: must be a number >= 0 and <= 36500, got -1"),
    "archive switch not a boolean": (changed("journal.archive", "no"),
                                     'journal.archive: must be true or false, got "no"'),
    "timeout not a number": (changed("transports.http.timeout_s", "abc"),
                             'transports.http.timeout_s: must be a number > 0 and <= 300, '
                             'got "abc"'),
    "unknown driver": (changed("shoe.driver", "acme"), 'shoe.driver: unknown driver "acme"'),
    "driver for the other device": (changed("shoe.driver", "line_panel"),
                                    'shoe.driver: "line_panel" drives the panel, not the shoe'),
    "driver option typo": (changed("shoe.baudrat", 9600),
                           "shoe.baudrat: unknown option; known: baudrate, cut_card_frames,"),
    "driver option out of range": (changed("shoe.reconnect_seconds", 0),
                                   "shoe.reconnect_seconds: must be >= 0.01, got 0"),
    "driver option of the wrong type": (changed("shoe.baudrate", "fast"),
                                        "shoe.baudrate: expected an integer, got 'fast'"),
    "driver option missing": (changed("shoe.url", DELETE), "shoe.url: required: the serial port"),
    "panel option typo": (changed("panel.baud", 9600),
                          "panel.baud: unknown option; known: baudrate, debounce_ms,"),
    "panel option out of range": (changed("panel.debounce_ms", -1),
                                  "panel.debounce_ms: must be in 0..1000, got -1"),
    # the control socket
    "world-writable socket (0666)": (changed("control.mode", "0666"),
                                     "control.mode: 0666 lets every user of this PC connect"),
    "world-writable socket (0662)": (edited("mode: '0660'", "mode: 0662"),
                                     "control.mode: 0662 lets every user of this PC connect"),
    "socket mode with execute bits": (changed("control.mode", 0o770),
                                      "control.mode: must be a socket mode from 0600 to 0664 "
                                      "with no execute bits, got 0770"),
    "unknown control group": (changed("control.group", "no-such-group-x"),
                              "control.group: no group named 'no-such-group-x' on this system"),
    # secrets
    "inline http secret": (changed("transports.http.secret", "hunter2"),
                           "transports.http.secret: secrets are not allowed inline"),
    "inline mqtt password": (changed("transports.mqtt.password", "hunter2"),
                             "transports.mqtt.password: secrets are not allowed inline"),
    "two secret sources": (changed("transports.http.secret_credential", "k"),
                           "transports.http.secret_file: give either secret_file or "
                           "secret_credential, not both"),
    "secret credential left empty": (http_credential(None),
                                     "transports.http.secret_credential: required: the secret"),
    "secret credential not a name": (http_credential("../etc/shadow"),
                                      "transports.http.secret_credential: must be a credential "
                                      "name"),
    "missing secret file": (changed("transports.http.secret_file", "/nonexistent/backend.secret"),
                            "transports.http.secret_file: cannot read /nonexistent/backend.secret:"
                            " No such file or directory"),
    "empty secret file": (secret_file("\n"), "transports.http.secret_file: "),
    "secret file is a directory": (changed("transports.http.secret_file", "/"),
                                   "transports.http.secret_file: cannot read /: Is a directory"),
    "missing secret credential": (http_credential("backend-secret"),
                                  "transports.http.secret_credential: cannot read "),
    "empty mqtt password credential": (empty_credential,
                                       "transports.mqtt.password_credential: "),
    # the journal's chain key
    "inline journal key": (changed("journal.key", "hunter2"),
                           "journal.key: secrets are not allowed inline in the config; put it "
                           "in a file readable only by the daemon and give `key_file: /path`"),
    "missing journal key file": (changed("journal.key_file", "/nonexistent/journal.key"),
                                 "journal.key_file: cannot read /nonexistent/journal.key: No "
                                 "such file or directory"),
    "journal key too short": (journal_key_file("abc\n"),
                              "journal.key_file: the key in "),
    "missing journal key credential": (changed("journal.key_credential", "journal-key"),
                                       "journal.key_credential: cannot read "),
    "two journal key sources": (journal_key_file("k" * 64, also_credential=True),
                                "journal.key_file: give either key_file or key_credential"),
}


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def pokdeng_table(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The real command, in its own process, under a memory limit and a time limit."""
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=TIME_LIMIT_S, cwd=tmp_path,
                          env=credentials_env(tmp_path), preexec_fn=limit_memory)


def assert_refused(result: subprocess.CompletedProcess, path: Path, expected: str) -> None:
    assert result.returncode == EX_CONFIG, result.stderr[-3000:]
    assert expected in result.stderr, result.stderr[-3000:]
    assert result.stderr.startswith(f"{path}: ")
    assert "Traceback" not in result.stderr
    assert len(result.stderr) < 30_000  # a list a person reads, never megabytes


def test_there_are_at_least_forty_broken_configs() -> None:
    assert len(BROKEN) >= 40


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_config_check_refuses_a_broken_config_naming_its_key(tmp_path: Path, case: str) -> None:
    make, expected = BROKEN[case]
    path = make(tmp_path)
    result = pokdeng_table(tmp_path, "config", "check", str(path))
    assert_refused(result, path, expected)
    assert not (tmp_path / "pwned").exists()


RUN_CASES = ["200 MB file", "alias bomb", "5,001-digit number", "duplicate nested key",
             "python object tag", "wrong type", "world-writable socket (0666)",
             "unknown control group", "missing secret file", "empty secret file",
             "missing secret credential", "empty mqtt password credential"]


@pytest.mark.slow
@pytest.mark.parametrize("case", RUN_CASES)
def test_run_refuses_what_config_check_refuses(tmp_path: Path, case: str) -> None:
    make, expected = BROKEN[case]
    path = make(tmp_path)
    result = pokdeng_table(tmp_path, "run", "--config", str(path))
    assert_refused(result, path, expected)
    assert not (tmp_path / "state").exists()  # nothing started, nothing written


def test_the_refused_ending_is_what_the_health_connection_adds() -> None:
    """config check refuses names ending as the health connection's login and client id end:
    the same ending the MQTT transport adds (were it to change, the check would guard
    nothing)."""
    from controller.service.config.logins import HEALTH_SUFFIX
    from controller.transports.mqtt import MqttTransport, health_login
    from controller.transports.mqtt_health import MqttHealthPublisher

    settings = MqttTransportSettings(host="127.0.0.1", port=1, username="T01")
    assert health_login(settings) == "T01" + HEALTH_SUFFIX
    events = MqttTransport(settings, table="T01")
    health = MqttHealthPublisher(settings, "T01", will={"state": "offline"})
    try:
        assert health.client_id == events.client_id + HEALTH_SUFFIX
    finally:
        health.close({"state": "offline"})


def test_the_refused_fixed_logins_are_the_studio_brokers() -> None:
    """The names config check keeps from tables are the fixed users of the broker's ACL."""
    from controller.service.config.logins import RESERVED_LOGINS

    acl = (Path(__file__).parents[2] / "config/mosquitto/pokdeng.acl").read_text()
    users = {line.split()[1] for line in acl.splitlines() if line.startswith("user ")}
    assert users == set(RESERVED_LOGINS)


def test_config_check_passes_a_good_config_within_the_same_limits(tmp_path: Path) -> None:
    good = write(tmp_path, base_config(tmp_path))
    result = pokdeng_table(tmp_path, "config", "check", str(good))
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout and "table T01" in result.stdout
    missing = pokdeng_table(tmp_path, "config", "check", str(tmp_path / "nope.yaml"))
    assert missing.returncode == EX_CONFIG and "cannot read the config file" in missing.stderr


def test_config_check_lists_every_error_at_once(tmp_path: Path) -> None:
    data = base_config(tmp_path)
    data["table"]["decks"] = 9
    data["transports"]["http"]["secret"] = "x"
    bad = write(tmp_path, data)
    result = pokdeng_table(tmp_path, "config", "check", str(bad))
    assert result.returncode == EX_CONFIG
    assert "2 configuration errors" in result.stderr
    assert "table.decks:" in result.stderr and "transports.http.secret:" in result.stderr


yaml_pieces = st.sampled_from([
    "table:", "shoe:", "\n", "  ", "id: ", "T01", "&a ", "*a", "!!int ", "!!python/object ",
    "? ", "[", "]", "{", "}", ",", "- ", "0x_", "1e999", ".nan", "2024-13-45", "'", '"', "#",
    "---", "<<: ", "yes", "~", "0660", ":", "\t", "%YAML 1.1\n", "!", "|", ">", "\x00", "\ufeff",
    "9" * 40])


@pytest.mark.slow
@settings(deadline=None, max_examples=300)
@given(st.lists(yaml_pieces, max_size=30).map("".join) | st.text(max_size=50))
def test_any_text_is_a_config_or_a_list_of_problems(text: str) -> None:
    """Whatever the file holds, the loader answers with a Config or messages, never a crash."""
    try:
        parse_config(load_yaml(text), "fuzz")
    except YamlProblems as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
    except ConfigError as exc:
        assert exc.errors
