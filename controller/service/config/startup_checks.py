"""What ``run`` needs from this system besides a valid file, checked the same way by
``config check``.

A config can be well-formed and the daemon still unable to start: a secret file missing, empty
or unreadable, a systemd credential not handed over, a group of the control section not
created. ``run`` reads its config with ``load_checked_config``; ``config check`` runs the same
checks (``secret_problems``, ``group_problems``) with the unit's credentials in place
(controller/service/config/unit_credentials.py), so it never passes a config ``run`` refuses.
Secrets are read with the transports' own ``read_secret`` (as the user running the command)
and dropped at once; nothing here connects anywhere or creates a file.
"""

from __future__ import annotations

import dataclasses
import os

from controller.service.config.errors import ConfigError
from controller.service.config.settings import Config, load_config
from controller.service.control.access import group_id, missing_group
from controller.service.trust.journal_key import key_option, load_journal_key
from controller.transports import TransportConfigError, read_secret


def load_checked_config(path: str | os.PathLike[str]) -> Config:
    """The config at ``path`` once the file and the system both hold; else ConfigError."""
    config = load_config(path)
    problems = secret_problems(config) + group_problems(config)
    if problems:
        raise ConfigError(problems, str(path))
    return config


def secret_problems(config: Config) -> list[str]:
    """Every configured secret that cannot be read or is empty, named by the key the file used."""
    problems = []
    for kind, settings in config.transports.items():
        for stem in _secret_stems(type(settings)):
            path = getattr(settings, f"{stem}_file")
            credential = getattr(settings, f"{stem}_credential")
            if path is None and credential is None:
                continue
            key = f"transports.{kind}.{stem}_{'credential' if credential else 'file'}"
            try:
                read_secret(key, path, credential)
            except TransportConfigError as exc:
                problems.append(str(exc))
    try:
        load_journal_key(config)  # the journal's chain key, read the way `run` reads it
    except TransportConfigError as exc:
        problems.append(str(exc))
    return problems


def named_credentials(config: Config) -> dict[str, list[str]]:
    """The systemd credentials the config reads: id -> the keys that name it."""
    named: dict[str, list[str]] = {}
    for kind, settings in config.transports.items():
        for stem in _secret_stems(type(settings)):
            credential = getattr(settings, f"{stem}_credential")
            if credential:
                named.setdefault(credential, []).append(f"transports.{kind}.{stem}_credential")
    if config.journal_key.credential:
        named.setdefault(config.journal_key.credential, []).append(key_option(config))
    return named


def secret_files(config: Config) -> list[tuple[str, str]]:
    """The secret files the config reads directly (``*_file`` keys): (key, path)."""
    files = []
    for kind, settings in config.transports.items():
        for stem in _secret_stems(type(settings)):
            path = getattr(settings, f"{stem}_file")
            if path:
                files.append((f"transports.{kind}.{stem}_file", str(path)))
    if config.journal_key.file:
        files.append(("journal.key_file", config.journal_key.file))
    return files


def _secret_stems(settings_class: type) -> list[str]:
    """The secrets a transport's settings declare (``option(secret="stem")``), once each."""
    stems = (f.metadata.get("config", {}).get("secret") for f in dataclasses.fields(settings_class))
    return list(dict.fromkeys(stem for stem in stems if stem))


def group_problems(config: Config) -> list[str]:
    """Every group the control section names (``group``, ``*_group``) that does not exist."""
    problems = []
    for field in dataclasses.fields(config.control):
        name = getattr(config.control, field.name)
        if name is None or not (field.name == "group" or field.name.endswith("_group")):
            continue
        if group_id(name) is None:
            problems.append(missing_group(f"control.{field.name}", name))
    return problems
