"""``pokdeng-table config check FILE``: validate a configuration without starting anything.

It checks what ``run`` checks before it starts (controller/service/config/startup_checks.py):
the file, and the secrets and groups it names on this system, read as the user who runs the
check. And what systemd checks before that: the installed unit that runs the file
(controller/service/config/unit_credentials.py) must be able to load every credential its
``LoadCredential=`` lines name, and must hand over every credential the config reads; without
``$CREDENTIALS_DIRECTORY`` the secrets are read from where the unit loads them (or from its
``SetCredential=`` lines). The unit must also let the daemon write its metrics file
(controller/service/config/unit_paths.py). A secret other users can read is a warning: the
check still passes.
"""

from __future__ import annotations

import argparse
import sys

from controller.service.config.errors import EX_CONFIG, ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "config", help="check a configuration file",
        description="Work with the daemon's YAML configuration (docs/install.md has an example; "
                    "config/example.yaml explains every key).")
    actions = parser.add_subparsers(dest="config_action", metavar="ACTION")
    check = actions.add_parser(
        "check", help="validate FILE and the secrets and groups it names: exit 0 when good, 78 "
                      "listing every error when not",
        description="Read FILE as `run` would: every key, the secrets it names (credentials, key "
                    "files) and the groups of the control socket. Exit 0 when the daemon would "
                    "start with it; 78 listing every error by key path.")
    check.add_argument("file", metavar="FILE", help="the daemon's YAML configuration file")
    check.add_argument("--unit", metavar="UNIT",
                       help="the systemd unit that runs FILE (default: pokdeng-table.service for "
                            "/etc/pokdeng-table/table.yaml, pokdeng-table@T.service for "
                            "/etc/pokdeng-table/T.yaml; 'none': check no unit)")
    check.add_argument("--root", metavar="DIR", default="/",
                       help="the system whose units and credentials to read (a mounted image "
                            "or chroot; FILE is a path inside it or under DIR)")
    check.set_defaults(func=check_config)
    parser.set_defaults(func=lambda args: _help(parser))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def check_config(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from controller.service.config.settings import DEBUG_NOT_SEALED, load_config
    from controller.service.config.startup_checks import (
        group_problems,
        named_credentials,
        secret_files,
        secret_problems,
    )
    from controller.service.config.unit_credentials import (
        CredentialsView,
        read_unit,
        readable_by_others,
        unit_for_config,
        unit_problems,
        unit_warnings,
    )
    from controller.service.config.unit_paths import metrics_problem

    try:
        config = load_config(args.file)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return EX_CONFIG
    unit_name = args.unit if args.unit is not None else unit_for_config(args.file, args.root)
    unit = read_unit(unit_name, args.root) if unit_name and unit_name != "none" else None
    named = named_credentials(config)
    as_root = os.geteuid() == 0  # systemd reads the credential files as root
    unit_found = unit_problems(unit, named, args.root, files=as_root) if unit else {}
    problems = list(unit_found.values())
    # a secret the unit cannot hand over is named once, by the unit's problem, not again as
    # a file the daemon could not read
    told = tuple(f"{key}:" for name in unit_found for key in named.get(name, ()))
    notes = []
    if unit_name and unit_name != "none" and unit is None:
        notes.append(f"no unit {unit_name} is installed: the credentials it would load were not "
                     "checked")
    elif unit is not None and not as_root:
        notes.append(f"not root: the credential files {unit.unit} loads were not checked (run "
                     "config check as root for them)")
    if (unit is not None and not unit.masked and as_root
            and not os.environ.get("CREDENTIALS_DIRECTORY")):
        # the secrets as the daemon will find them: from where the unit loads them
        with CredentialsView(unit, args.root) as view:
            os.environ["CREDENTIALS_DIRECTORY"] = str(view.path)
            unread = tuple(f"{key}:" for name in view.unchecked for key in named.get(name, ()))
            try:
                # named by the operator's file or line, not by the view's copy of it
                problems += view.problems + [view.named_as_the_operator_knows_it(problem)
                                             for problem in secret_problems(config)
                                             if not problem.startswith(told + unread)]
            finally:
                del os.environ["CREDENTIALS_DIRECTORY"]
            notes += view.notes
    else:
        problems += secret_problems(config)
    problems += group_problems(config)
    if unit is not None and not unit.masked and config.metrics.textfile:
        # the daemon would only log that it cannot write it: a table Prometheus never hears of
        metrics = metrics_problem(config.metrics.textfile, unit.unit, args.root)
        if metrics is not None:
            problems.append(metrics)
    warnings = unit_warnings(unit, named, args.root) if unit is not None and as_root else []
    for key, path in secret_files(config):
        warning = readable_by_others(Path(path), key, path)
        if warning:
            warnings.append(warning)
    if config.display is not None:
        from controller.display.words import BEHIND_ENGLISH, PROBLEMS, behind_english

        if "en" in PROBLEMS:  # an operator's en.po that is not whole: the package's is used
            warnings.append("the screens speak the package's English, not "
                            + "; ".join(PROBLEMS["en"]))
        # any offered language: a page may ask for it (?lang=), not only display.language
        warnings += [warning for code in BEHIND_ENGLISH
                     if (warning := behind_english(code)) is not None]
    for note in notes:
        print(f"{args.file}: note: {note}", file=sys.stderr)
    for warning in warnings:
        print(f"{args.file}: WARNING: {warning}", file=sys.stderr)
    if problems:
        print(ConfigError(list(dict.fromkeys(problems)), args.file).report(), file=sys.stderr)
        return EX_CONFIG
    transports = [name for name, section in (("http", config.http), ("mqtt", config.mqtt),
                                             ("file", config.file_sink)) if section is not None]
    panel = config.panel.driver if config.panel else "none"
    print(f"{args.file}: OK — table {config.table.table_id}, shoe driver {config.shoe.driver}, "
          f"panel driver {panel}, journal {config.journal_path}, control socket "
          f"{config.control.socket}, transports: {', '.join(transports) or 'none'}, "
          f"display {'off' if config.display is None else config.display.listen}")
    if unit is not None:
        print(f"{args.file}: unit {unit.unit} ({', '.join(unit.files)}) hands over: "
              f"{', '.join(sorted(unit.credentials)) or 'no credentials'}")
    if config.logging.level == "debug":
        print(f"{args.file}: WARNING: {DEBUG_NOT_SEALED}", file=sys.stderr)
    return 0
