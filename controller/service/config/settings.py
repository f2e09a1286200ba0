"""The daemon's configuration: a YAML file read through a small typed schema.

Like Klipper's config reader: every option is read by a typed getter with bounds, a section
rejects options nobody read (a typo is an error, not a silent default), and every problem names
its key path (``transports.http.timeout_s: must be a number > 0, got "abc"``). Errors are
collected, not raised one by one, so an installer sees the whole list at once:
``load_config`` raises ``ConfigError`` whose ``errors`` holds every message.

The transports' options are declared once, by their settings dataclasses
(``controller/transports/*``: field name, type, default and ``option(...)`` bounds); the
``transports:`` section is read from those fields and yields those settings objects.

Secrets never live in this file: the HTTP signing secret and the MQTT password are given as a
file path (``secret_file``) or a systemd credential name (``secret_credential``, read from
``$CREDENTIALS_DIRECTORY`` at start-up, see ``LoadCredential=`` in the unit).
"""

from __future__ import annotations

import dataclasses
import os
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller import transports
from controller.display.settings import DisplaySettings, parse_listen
from controller.display.studio import parse_studio
from controller.display.words import LANGUAGES, PROBLEMS
from controller.durability.archives.retention import RetentionSettings
from controller.service.config.errors import EX_CONFIG, ConfigError  # noqa: F401 (re-exported)
from controller.service.config.logins import login_problems
from controller.service.config.yaml_reader import YamlProblems, read_yaml_file
from controller.table.records import MachineSettings
from controller.transports import OptionConflict
from drivers import registry
from drivers.base import DriverConfigError

DEFAULT_STATE_DIR = "/var/lib/pokdeng-table"
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("auto", "json", "console")

_MISSING: Any = object()

MAX_SHOWN_CHARS = 60      # a quoted value in a message


def _show(value: Any) -> str:
    """A value as the user wrote it, for messages (a long text is cut short)."""
    if isinstance(value, str):
        if len(value) > MAX_SHOWN_CHARS:
            return f'"{value[:MAX_SHOWN_CHARS]}…" ({len(value)} characters)'
        return '"' + value + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


class Section:
    """Typed, bounded access to one mapping of the config; records problems instead of raising.

    Each getter marks its key as known; ``finish()`` reports the keys nobody asked for.
    """

    def __init__(self, data: Mapping[str, Any], path: str, errors: list[str]):
        self.data = data
        self.path = path
        self.errors = errors
        self.known: set[str] = set()

    # -- helpers ------------------------------------------------------------------------------
    def key_path(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, message: str) -> None:
        self.errors.append(f"{self.key_path(key)}: {message}")

    def _raw(self, key: str, default: Any) -> Any:
        self.known.add(key)
        if key in self.data and self.data[key] is not None:
            return self.data[key]
        if default is _MISSING:
            self.error(key, "required, missing")
        return default

    # -- typed getters ------------------------------------------------------------------------
    def get_str(self, key: str, default: Any = _MISSING, *, choices: tuple[str, ...] = (),
                pattern: re.Pattern[str] | None = None, what: str = "") -> Any:
        value = self._raw(key, default)
        if value is default:
            return value
        if not isinstance(value, str) or not value.strip():
            self.error(key, f"must be a non-empty string, got {_show(value)}")
            return default if default is not _MISSING else None
        if choices and value not in choices:
            self.error(key, f"must be one of {', '.join(choices)}; got {_show(value)}")
            return default if default is not _MISSING else None
        if pattern is not None and not pattern.match(value):
            self.error(key, f"must be {what or pattern.pattern}, got {_show(value)}")
            return default if default is not _MISSING else None
        return value

    def get_list(self, key: str, default: Any = _MISSING) -> Any:
        """A list (its items are the caller's to check); anything else is an error."""
        value = self._raw(key, default)
        if value is not default and not isinstance(value, list):
            self.error(key, f"must be a list, got {_show(value)}")
            return default if default is not _MISSING else None
        return value

    def get_path(self, key: str, default: Any = _MISSING) -> Any:
        value = self.get_str(key, default)
        if isinstance(value, str) and value is not default and not os.path.isabs(value):
            self.error(key, f"must be an absolute path, got {_show(value)}")
            return default if default is not _MISSING else None
        return value

    def _number(self, key: str, default: Any, kind: type, minval: float | None,
                maxval: float | None, above: float | None) -> Any:
        value = self._raw(key, default)
        if value is default:
            return value
        noun = "an integer" if kind is int else "a number"
        bounds = []
        if above is not None:
            bounds.append(f"> {above:g}")
        if minval is not None:
            bounds.append(f">= {minval:g}")
        if maxval is not None:
            bounds.append(f"<= {maxval:g}")
        wanted = f"must be {noun}" + (f" {' and '.join(bounds)}" if bounds else "")
        ok_type = (isinstance(value, int) if kind is int else isinstance(value, (int, float)))
        if isinstance(value, bool) or not ok_type or value != value:  # NaN != NaN
            self.error(key, f"{wanted}, got {_show(value)}")
            return default if default is not _MISSING else None
        if ((above is not None and not value > above)
                or (minval is not None and value < minval)
                or (maxval is not None and value > maxval)):
            self.error(key, f"{wanted}, got {_show(value)}")
            return default if default is not _MISSING else None
        return kind(value)

    def get_int(self, key: str, default: Any = _MISSING, *, minval: float | None = None,
                maxval: float | None = None) -> Any:
        return self._number(key, default, int, minval, maxval, None)

    def get_float(self, key: str, default: Any = _MISSING, *, minval: float | None = None,
                  maxval: float | None = None, above: float | None = None) -> Any:
        return self._number(key, default, float, minval, maxval, above)

    def get_bool(self, key: str, default: Any = _MISSING) -> Any:
        value = self._raw(key, default)
        if value is default:
            return value
        if not isinstance(value, bool):
            self.error(key, f"must be true or false, got {_show(value)}")
            return default if default is not _MISSING else None
        return value

    def get_section(self, key: str, *, required: bool = False) -> Section | None:
        value = self._raw(key, _MISSING if required else None)
        if value is None or value is _MISSING:
            return None
        if not isinstance(value, dict):
            self.error(key, f"must be a mapping of options, got {_show(value)}")
            return None
        bad = [k for k in value if not isinstance(k, str)]
        for k in bad:
            self.error(key, f"option names must be text, got {_show(k)}")
        return Section({k: v for k, v in value.items() if isinstance(k, str)},
                       self.key_path(key), self.errors)

    def reject_inline_secret(self, key: str, file_key: str, credential_key: str) -> None:
        """An inline secret is an error that says how to give it instead."""
        if key in self.data:
            self.known.add(key)
            self.error(key, f"secrets are not allowed inline in the config; put it in a file "
                            f"readable only by the daemon and give `{file_key}: /path`, or a "
                            f"systemd credential name with `{credential_key}: NAME` "
                            f"(LoadCredential= in the unit)")

    def finish(self) -> None:
        for key in self.data:
            if key not in self.known:
                allowed = ", ".join(sorted(self.known))
                self.error(key, f"unknown option (a typo?); allowed here: {allowed}")


# --- the typed configuration ------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceConfig:
    """A device section: the driver's name and its options, checked by the driver itself."""

    driver: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def driver_options(self) -> dict[str, Any]:
        return dict(self.options)


@dataclass(frozen=True)
class ControlConfig:
    socket: str
    group: str | None = None
    mode: int = 0o660
    supervisor_group: str = "pokdeng-supervisor"  # who may act (reading needs only the socket)
    max_clients: int = 16


#: what the daemon and ``config check`` say about a table that logs at DEBUG
DEBUG_NOT_SEALED = ("logging at DEBUG: this table is NOT SEALED — DEBUG lines carry raw shoe "
                    "frames, tag ids and card values of rounds whose betting is open; use it "
                    "only on a bench, never on a live table")


@dataclass(frozen=True)
class LoggingConfig:
    level: str = "info"
    format: str = "auto"


@dataclass(frozen=True)
class JournalKeySource:
    """Where the journal's chain key is read from (``journal.key_file`` or
    ``journal.key_credential``); neither: a plain chain (docs/durability.md, Keyed chain)."""

    file: str | None = None
    credential: str | None = None

    @property
    def given(self) -> bool:
        return self.file is not None or self.credential is not None


@dataclass(frozen=True)
class MetricsConfig:
    """Prometheus metrics as a node_exporter textfile (no port opened); off without a path."""

    textfile: str | None = None
    interval_s: float = 15.0


@dataclass(frozen=True)
class Config:
    table: MachineSettings
    state_dir: str
    shoe: DeviceConfig
    panel: DeviceConfig | None
    control: ControlConfig
    #: kind -> that transport's settings dataclass (controller.transports), in BUILTIN order
    transports: Mapping[str, Any] = field(default_factory=dict)
    logging: LoggingConfig = LoggingConfig()
    journal: RetentionSettings = RetentionSettings()
    source: str | None = None
    display: DisplaySettings | None = None  # the dealer display's web page; None: off
    journal_key: JournalKeySource = JournalKeySource()
    metrics: MetricsConfig = MetricsConfig()
    #: how long a start waits for the backends to say where they stand (docs/backend.md)
    backend_confirm_s: float = 5.0
    #: the journal's WAL: checkpointed past this size, and kept allocated to it so a commit
    #: never grows the file (controller/durability/wal_checkpoints.py); ``journal.wal_kib``
    wal_bytes: int = 4 * 1024 * 1024
    #: SCHED_RR priority of the threads on a card's way from READY on; 0: the normal priority
    #: (controller/service/realtime.py; the unit must permit it: LimitRTPRIO=)
    realtime_priority: int = 0

    @property
    def http(self) -> Any:
        return self.transports.get("http")

    @property
    def mqtt(self) -> Any:
        return self.transports.get("mqtt")

    @property
    def file_sink(self) -> Any:
        return self.transports.get("file")

    @property
    def journal_path(self) -> str:
        return os.path.join(self.state_dir, "journal.sqlite")

    def machine_settings(self) -> MachineSettings:
        return self.table


#: the highest real-time priority a config may ask for (``realtime_priority``): above other
#: real-time work a table PC might have (audio, a kiosk's compositor) is never the daemon's
HIGHEST_PRIORITY = 50


# --- readers, one per section -----------------------------------------------------------------

if typing.TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Settings = typing.TypeVar("_Settings", bound="DataclassInstance")


def _read_table(s: Section) -> MachineSettings | None:
    return _read_settings(s, MachineSettings)


def _read_device(s: Section, device: str) -> DeviceConfig | None:
    """``driver`` names a registered driver for ``device``; every other key is its option.

    The options are validated by the driver class itself (the same code that runs in the
    daemon), so the config and the driver cannot disagree about what an option means.
    """

    name = s.get_str("driver")
    options = {k: v for k, v in s.data.items() if k != "driver"}
    s.known.update(options)
    if not isinstance(name, str):
        return None
    known = registry.available()
    if name not in known:
        s.error("driver", f"unknown driver {_show(name)}; known drivers: "
                          f"{', '.join(sorted(known)) or 'none installed'}")
        return None
    try:
        cls = registry.driver_class(name)
    except Exception as exc:  # e.g. its library is not installed
        s.error("driver", f"driver {_show(name)} cannot be loaded: {exc}")
        return None
    if getattr(cls, "device", device) != device:
        s.error("driver", f"{_show(name)} drives the {cls.device}, not the {device}")
        return None
    try:
        problems = cls.check_options(options)
    except (DriverConfigError, ValueError, TypeError) as exc:  # a driver without the contract
        problems = [(None, str(exc))]
    for option, problem in problems:
        s.errors.append(f"{s.key_path(option)}: {problem}" if option else f"{s.path}: {problem}")
    return None if problems else DeviceConfig(driver=name, options=options)


def _default_state_dir(environ: Mapping[str, str]) -> str:
    # systemd's StateDirectory= exports the path; outside systemd fall back to the FHS place.
    return environ.get("STATE_DIRECTORY", "").split(":")[0] or DEFAULT_STATE_DIR


def _default_socket(state_dir: str, environ: Mapping[str, str]) -> str:
    runtime = environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    return os.path.join(runtime or state_dir, "control.sock")


def _get_mode(s: Section, key: str, default: int) -> int:
    """A socket mode: 0o660 (YAML 1.1 reads 0660 as octal too) or the text "0660"/"0o660"."""
    value = written = s._raw(key, default)
    if isinstance(value, str):
        try:
            value = int(value, 8)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, int) or not 0o600 <= value <= 0o666 \
            or value & 0o111:
        shown = f"{written:04o}" if type(written) is int else _show(written)
        s.error(key, f"must be a socket mode from 0600 to 0664 with no execute bits, got {shown}")
        return default
    if value & 0o002:
        # Connecting needs write permission: o+w makes every account on the PC a supervisor.
        s.error(key, f"{value:04o} lets every user of this PC connect to the control socket; "
                     f"use 0660 and give the people who may use it control.group")
        return default
    return value


def _read_control(s: Section | None, state_dir: str, environ: Mapping[str, str]) -> ControlConfig:
    if s is None:
        return ControlConfig(socket=_default_socket(state_dir, environ))
    control = ControlConfig(
        socket=s.get_path("socket", _default_socket(state_dir, environ)),
        group=s.get_str("group", None),
        mode=_get_mode(s, "mode", 0o660),
        supervisor_group=s.get_str("supervisor_group", ControlConfig.supervisor_group),
        max_clients=s.get_int("max_clients", ControlConfig.max_clients, minval=4, maxval=1024),
    )
    s.finish()
    return control


def _read_secret(s: Section, stem: str, required: bool) -> tuple[str | None, str | None]:
    """``<stem>_file`` or ``<stem>_credential``, one of them; never the secret inline."""
    file_key, cred_key = f"{stem}_file", f"{stem}_credential"
    errors_before = len(s.errors)
    s.reject_inline_secret(stem, file_key, cred_key)
    path = s.get_path(file_key, None)
    credential = s.get_str(cred_key, None, pattern=re.compile(r"^[A-Za-z0-9_.-]+$"),
                           what="a credential name (letters, digits, '_', '.', '-')")
    if path is not None and credential is not None:
        s.error(file_key, f"give either {file_key} or {cred_key}, not both")
    elif path is None and credential is None and required and len(s.errors) == errors_before:
        # Name the key the file used (``secret_credential: null``), else the file path one.
        given = cred_key if cred_key in s.data else file_key
        s.error(given, f"required: the {stem} as a file path ({file_key}) or a systemd "
                       f"credential name ({cred_key})")
    return path, credential


def _plain_type(hint: Any) -> Any:
    """``str | None`` -> ``str``: the type a setting has when it is given."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def _read_settings(s: Section, settings_class: type[_Settings]) -> _Settings | None:
    """A settings dataclass (the table's, a transport's) read by its fields and their
    ``config`` metadata rules (``key`` when the config names it otherwise, ``required``);
    rules across options are the class's own (``OptionConflict`` names the option)."""
    hints = typing.get_type_hints(settings_class)
    errors_before = len(s.errors)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(settings_class):
        rules = dict(f.metadata.get("config", {}))
        stem = rules.pop("secret", None)
        if stem is not None:
            if f"{stem}_file" not in values:
                values[f"{stem}_file"], values[f"{stem}_credential"] = _read_secret(
                    s, stem, rules.get("required", False))
            continue
        key = rules.pop("key", f.name)
        required = rules.pop("required", False)
        default = _MISSING if required or f.default is dataclasses.MISSING else f.default
        kind = _plain_type(hints[f.name])
        if rules.pop("path", False):
            values[f.name] = s.get_path(key, default)
        elif kind is bool:
            values[f.name] = s.get_bool(key, default)
        elif kind is int:
            values[f.name] = s.get_int(key, default, **rules)
        elif kind is float:
            values[f.name] = s.get_float(key, default, **rules)
        else:
            values[f.name] = s.get_str(key, default, **rules)
    s.finish()
    try:
        return settings_class(**values)
    except OptionConflict as exc:
        s.error(exc.option, exc.problem)
        return None
    except (ValueError, TypeError):
        if len(s.errors) > errors_before:  # already named under its key; nothing to build
            return None
        raise


def _read_transports(s: Section | None) -> dict[str, Any]:
    if s is None:
        return {}
    found: dict[str, Any] = {}
    for kind in transports.available():
        section = s.get_section(kind)
        if section is None:
            continue
        try:
            settings_class = transports.settings_class(kind)
        except Exception as exc:  # e.g. its library is not installed
            s.error(kind, f"the {kind} transport cannot be loaded: {exc}")
            continue
        found[kind] = _read_settings(section, settings_class)
    s.finish()
    return found


def _read_logging(s: Section | None) -> LoggingConfig:
    if s is None:
        return LoggingConfig()
    config = LoggingConfig(level=s.get_str("level", "info", choices=LOG_LEVELS),
                           format=s.get_str("format", "auto", choices=LOG_FORMATS))
    s.finish()
    return config


def _read_journal(s: Section | None) -> tuple[RetentionSettings, JournalKeySource, float, int]:
    if s is None:
        return RetentionSettings(), JournalKeySource(), Config.backend_confirm_s, Config.wal_bytes
    confirm_s = s.get_float("backend_confirm_s", Config.backend_confirm_s, minval=0, maxval=600)
    wal_bytes = 1024 * s.get_int("wal_kib", Config.wal_bytes // 1024, minval=64,
                                 maxval=256 * 1024)
    settings = RetentionSettings(
        archive=s.get_bool("archive", True),
        retention_days=s.get_float("retention_days", 30.0, minval=0, maxval=36500),
        archive_dir=s.get_path("archive_dir", None),
    )
    key_file, key_credential = _read_secret(s, "key", False)
    s.finish()
    return settings, JournalKeySource(key_file, key_credential), confirm_s, wal_bytes


def _read_display(s: Section | None) -> DisplaySettings | None:
    """``display: {listen: "127.0.0.1:8080", max_clients: 16, language: en, studio: {…}}``;
    no section: no display (``studio``: controller/display/studio.py)."""
    if s is None:
        return None
    default = DisplaySettings()
    listen = s.get_str("listen", default.listen)
    max_clients = s.get_int("max_clients", default.max_clients, minval=1, maxval=256)
    allowed_hosts = _host_names(s, "allowed_hosts")
    language = s.get_str("language", default.language)
    if isinstance(language, str) and language not in LANGUAGES:
        # a language is any catalogue file that reads whole (controller/display/catalogues.py)
        why = PROBLEMS.get(language) or [
            f"no catalogue {language}.po (languages: {', '.join(LANGUAGES)})"]
        s.error("language", f"{_show(language)} cannot be used: {'; '.join(why)}")
        language = None
    studio, problems = parse_studio(s._raw("studio", None), s.key_path("studio"))
    s.errors.extend(problems)
    s.finish()
    if not isinstance(listen, str) or not isinstance(language, str):  # named by get_str
        return None
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        s.error("listen", f"{exc}; got {_show(listen)}")
        return None
    return DisplaySettings(host=host, port=port, max_clients=max_clients,
                           allowed_hosts=allowed_hosts, language=language, studio=studio)


_HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                        r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def _host_names(s: Section, key: str) -> tuple[str, ...]:
    """A list of DNS names (``display.allowed_hosts``); each bad one is an error naming it."""
    value = s.get_list(key, [])
    if not isinstance(value, list):
        return ()
    names = []
    for index, name in enumerate(value):
        if not isinstance(name, str) or not _HOST_NAME.match(name):
            s.error(f"{key}[{index}]", f"not a host name: {_show(name)}")
        else:
            names.append(name.lower())
    return tuple(names)


def _read_metrics(s: Section | None) -> MetricsConfig:
    if s is None:
        return MetricsConfig()
    textfile = s.get_path("textfile", None)
    if isinstance(textfile, str) and not textfile.endswith(".prom"):
        s.error("textfile", f"must end in .prom (node_exporter's textfile collector reads only "
                            f"those), got {_show(textfile)}")
    config = MetricsConfig(textfile=textfile,
                           interval_s=s.get_float("interval_s", MetricsConfig.interval_s,
                                                  minval=1, maxval=3600))
    s.finish()
    return config


def parse_config(data: Any, source: str | None = None,
                 environ: Mapping[str, str] = os.environ) -> Config:
    """Validate a loaded YAML document; raise ConfigError listing every problem."""
    errors: list[str] = []
    if data is None:
        raise ConfigError(["the file is empty; it needs at least the table, shoe and panel "
                           "sections (see config/example.yaml)"], source)
    if not isinstance(data, dict):
        raise ConfigError([f"the top level must be a mapping of sections, got {_show(data)}"],
                          source)
    root = Section(data, "", errors)
    table_s = root.get_section("table", required=True)
    table = _read_table(table_s) if table_s else None
    state_dir = root.get_path("state_dir", _default_state_dir(environ))
    shoe_s = root.get_section("shoe", required=True)
    shoe = _read_device(shoe_s, "shoe") if shoe_s else None
    panel_s = root.get_section("panel")
    panel = _read_device(panel_s, "panel") if panel_s else None
    control = _read_control(root.get_section("control"), state_dir or DEFAULT_STATE_DIR, environ)
    transports = _read_transports(root.get_section("transports"))
    logging_config = _read_logging(root.get_section("logging"))
    journal, journal_key, backend_confirm_s, wal_bytes = _read_journal(
        root.get_section("journal"))
    display = _read_display(root.get_section("display"))
    metrics = _read_metrics(root.get_section("metrics"))
    realtime_priority = root.get_int("realtime_priority", 0, minval=0, maxval=HIGHEST_PRIORITY)
    root.finish()
    errors += login_problems(table.table_id if table else None, transports.get("mqtt"))
    if errors:
        raise ConfigError(errors, source)
    assert table is not None and shoe is not None
    return Config(table=table, state_dir=state_dir, shoe=shoe, panel=panel, control=control,
                  transports=transports, logging=logging_config,
                  journal=journal, source=source, display=display, journal_key=journal_key,
                  metrics=metrics, backend_confirm_s=backend_confirm_s,
                  realtime_priority=realtime_priority, wal_bytes=wal_bytes)


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str] = os.environ) -> Config:
    """Read and validate a YAML config file; raise ConfigError listing every problem."""
    source = str(path)
    try:
        data = read_yaml_file(path)
    except YamlProblems as exc:
        raise ConfigError(exc.problems, source) from None
    return parse_config(data, source, environ)
