"""The config's ``display:`` section: off unless given, an address the daemon can listen on,
every problem named by its key path (``config check`` exits 78)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.display.settings import DisplaySettings
from controller.service.config.settings import EX_CONFIG, ConfigError, parse_config
from controller.service.control.access import own_group


def config_with(tmp_path: Path, display: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "table": {"id": "T01"},
        "state_dir": str(tmp_path / "state"),
        "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe"},
        "control": {"socket": str(tmp_path / "control.sock"), "supervisor_group": own_group()},
    }
    if display is not None:
        data["display"] = display
    return data


def test_no_section_no_display(tmp_path: Path) -> None:
    assert parse_config(config_with(tmp_path), "t").display is None


@pytest.mark.parametrize("listen, host, port", [
    ("127.0.0.1:8080", "127.0.0.1", 8080), ("0.0.0.0:80", "0.0.0.0", 80),
    ("[::1]:9000", "::1", 9000), ("localhost:0", "127.0.0.1", 0)])
def test_listen_addresses(tmp_path: Path, listen: str, host: str, port: int) -> None:
    config = parse_config(config_with(tmp_path, {"listen": listen, "max_clients": 4}), "t")
    assert config.display == DisplaySettings(host=host, port=port, max_clients=4)


def test_an_empty_section_listens_on_loopback_8080(tmp_path: Path) -> None:
    assert parse_config(config_with(tmp_path, {}), "t").display == DisplaySettings()


def test_the_studio_section_gives_the_stream_its_limits_currency_and_colours(
        tmp_path: Path) -> None:
    studio = {"currency": "PHP", "colours": {"accent": "#FFAA00"},
              "limits": {"player": {"min": 100, "max": 50000}, "pair": {"min": 50, "max": 5000}}}
    settings = parse_config(config_with(tmp_path, {"studio": studio}), "t").display
    assert settings is not None
    shown = settings.studio.to_json()
    assert shown["currency"] == "PHP" and shown["colours"]["accent"] == "#ffaa00"
    assert shown["limits"] == {"player": {"min": 100, "max": 50000},
                               "pair": {"min": 50, "max": 5000}}
    # the paytable is the rules' (docs/rules.md §7, §8), never a setting
    assert [row["odds"] for row in shown["paytable"]] == ["1:1", "2:1", "2:1", None, "11:1",
                                                          None]
    assert type(settings.studio).from_json(shown) == settings.studio


def test_the_studio_names_the_tables_time_zone_for_the_game_ids_day(tmp_path: Path) -> None:
    display = parse_config(config_with(tmp_path, {"studio": {"timezone": "Asia/Manila"}}),
                           "t").display
    assert display is not None and display.studio.timezone == "Asia/Manila"
    assert str(display.studio.zone()) == "Asia/Manila"
    # the screen process gets it back from the JSON it is sent
    assert type(display.studio).from_json(display.studio.to_json()) == display.studio
    # none given: the system's local zone, as a table PC set up in its studio has
    default = parse_config(config_with(tmp_path, {"studio": {}}), "t").display
    assert default is not None and default.studio.zone() is None


@pytest.mark.parametrize("display, message", [
    ({"listen": "8080"}, "display.listen: must be ADDRESS:PORT, e.g. 127.0.0.1:8080; "
                         'got "8080"'),
    ({"listen": "table.example:80"}, "display.listen: 'table.example' is not an IP address"),
    ({"listen": "127.0.0.1:99999"}, "display.listen: port must be a number from 0 to 65535"),
    ({"listen": 8080}, "display.listen: must be a non-empty string, got 8080"),
    ({"max_clients": 0}, "display.max_clients: must be an integer >= 1 and <= 256, got 0"),
    ({"port": 8080}, "display.port: unknown option (a typo?); allowed here: allowed_hosts, "
                     "language, listen, max_clients, studio"),
    ({"studio": {"currency": "peso"}}, "display.studio.currency: must be a three-letter ISO "
                                       "4217 code such as PHP, MYR or JPY, got 'peso'"),
    ({"studio": {"limits": {"player": {"min": 500, "max": 100}}}},
     "display.studio.limits.player: min 500 is above max 100"),
    ({"studio": {"limits": {"player": {"min": 0, "max": 100}}}},
     "display.studio.limits.player: min and max must be whole amounts from 1 to 999,999,999"),
    ({"studio": {"limits": {"player": [100, 500]}}},
     "display.studio.limits.player: must be {min: N, max: N}, got [100, 500]"),
    ({"studio": {"limits": {"banker": {"min": 1, "max": 2}}}},
     "display.studio.limits.banker: unknown bet (player, pair)"),
    ({"studio": {"colours": {"accent": "gold"}}},
     "display.studio.colours.accent: must be a colour as #rrggbb (quoted in YAML), got 'gold'"),
    ({"studio": {"colors": {}}}, "display.studio.colors: unknown key (currency, limits, "
                                 "colours, timezone)"),
    ({"studio": "big"}, "display.studio: must be a mapping (currency, limits, colours, "
                        "timezone)"),
    ({"studio": {"timezone": "Asia/Manilla"}},
     "display.studio.timezone: 'Asia/Manilla' is not a time zone this system knows"),
    ({"studio": {"timezone": "+08:00"}},
     "display.studio.timezone: '+08:00' is not a time zone this system knows"),
    ({"studio": {"timezone": 8}},
     "display.studio.timezone: must be an IANA time zone name such as Asia/Manila, got 8"),
    ({"allowed_hosts": "table-01"}, 'display.allowed_hosts: must be a list, got "table-01"'),
    ({"allowed_hosts": ["ok.example", "two words"]},
     'display.allowed_hosts[1]: not a host name: "two words"'),
    ("on", 'display: must be a mapping of options, got "on"'),
])
def test_bad_display_options_are_named(tmp_path: Path, display: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_with(tmp_path, display), "t")
    assert any(error.startswith(message) for error in caught.value.errors), caught.value.errors


def test_config_check_says_where_the_display_listens(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(yaml.safe_dump(config_with(tmp_path, {"listen": "127.0.0.1:8081"})))
    result = subprocess.run([sys.executable, "-m", "controller", "config", "check", str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "display 127.0.0.1:8081" in result.stdout


def test_config_check_exits_78_on_a_bad_listen_address(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(yaml.safe_dump(config_with(tmp_path, {"listen": "nowhere"})))
    result = subprocess.run([sys.executable, "-m", "controller", "config", "check", str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == EX_CONFIG
    assert "display.listen: must be ADDRESS:PORT" in result.stderr
