"""``pokdeng-table man``: the manual page pokdeng-table(1) in roff, built from the argparse
parser: every command, its usage, description and options, as ``--help`` shows them.

The Debian package (packaging/build-deb) generates it at build time and installs it as
/usr/share/man/man1/pokdeng-table.1.gz, with the documents SEE ALSO names under
/usr/share/doc/pokdeng-table.
"""

from __future__ import annotations

import argparse
import re

FILES = (
    ("/etc/pokdeng-table/table.yaml", "the table's configuration (config/example.yaml "
                                      "annotates every key)"),
    ("/etc/pokdeng-table/example.yaml", "the annotated example configuration the package "
                                        "installs: copy it to table.yaml and edit"),
    ("/etc/pokdeng-table/credentials/", "the backend secret and the journal's chain key, "
                                        "handed to the daemon by LoadCredential= (root only)"),
    ("/etc/pokdeng-table/TABLE.yaml", "a table's configuration with the template unit "
                                      "pokdeng-table@TABLE.service"),
    ("/var/lib/pokdeng-table/journal.sqlite", "the journal: every input and event, hash "
                                              "chained"),
    ("/run/pokdeng-table/control.sock", "the control socket of status, watch and supervisor"),
)
SEE_ALSO = "systemctl(1), journalctl(1), systemd.unit(5)"
#: the package installs docs/ here (packaging/build-deb); a clone has them in docs/
DOC_DIR = "/usr/share/doc/pokdeng-table"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "man", help="print the manual page pokdeng-table(1) (roff)",
        description="Print the manual page, in roff, built from the command's own parser: "
                    "`pokdeng-table man | man -l -` reads it. The Debian package installs it "
                    "(man pokdeng-table).")
    parser.set_defaults(func=man)


def man(args: argparse.Namespace) -> int:
    from controller.commands.cli import build_parser

    print(manual(build_parser()), end="")
    return 0


def escape(text: str) -> str:
    """Text as roff shows it literally: backslashes, hyphens, no request at a line start, and
    ASCII only (``\\[u2014]`` for —, ``\\[u2666]`` for ♦: troff reads bytes, not UTF-8)."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(f"\\[u{ord(ch):04X}]" if ord(ch) > 127 else ch for ch in text)
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line
                     for line in text.split("\n"))


def installed_paths(text: str) -> str:
    """The clone's paths that the commands' help names, as the Debian package installs them:
    docs/X under /usr/share/doc/pokdeng-table, config/example.yaml in /etc/pokdeng-table."""
    text = re.sub(r"(?<![\w/])docs/(?=[\w.-]+\.(?:md|json)\b)", DOC_DIR + "/", text)
    return re.sub(r"(?<![\w/])config/example\.yaml\b", "/etc/pokdeng-table/example.yaml", text)


def _words(text: str | None) -> str:
    return escape(installed_paths(re.sub(r"\s+", " ", text or "").strip()))


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand, in the order --help lists them."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def _options(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or action.dest.upper()
                name += " " + (metavar if isinstance(metavar, str) else " ".join(metavar))
        else:
            name = str(action.metavar or action.dest)
            if action.choices:
                name = "|".join(str(choice) for choice in action.choices)
        lines += [".TP", f"\\fB{escape(name)}\\fR", _words(action.help) or "\\&"]
    return lines


def _command(path: str, helptext: str, parser: argparse.ArgumentParser) -> list[str]:
    usage = parser.format_usage().replace("usage: ", "", 1).strip()
    lines = [f'.SS "{escape(path)}"', _words(helptext) or "\\&", ".PP",
             ".nf", escape(re.sub(r"\s+", " ", usage)), ".fi"]
    if parser.description:
        lines += [".PP", _words(parser.description)]
    lines += _options(parser)
    for name, subhelp, sub in _subcommands(parser):
        lines += _command(f"{path} {name}", subhelp, sub)
    return lines


def manual(parser: argparse.ArgumentParser) -> str:
    from controller import __version__

    prog = parser.prog
    lines = [
        f'.TH {prog.upper()} 1 "" "{prog} {__version__}" "User Commands"',
        ".SH NAME", f"{escape(prog)} \\- {_words(parser.description)}",
        ".SH SYNOPSIS", f"\\fB{escape(prog)}\\fR [\\fB\\-\\-version\\fR] "
                        f"\\fICOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        _words("The dealer-table controller of a live Pok Deng table: it reads the "
               "card-reading shoe and the button panel, runs the table's procedure, journals "
               "every input and event, and delivers the events to the game backend. `run` is "
               "the daemon (a systemd service); the other commands read or act on it, or work "
               "on their own. `COMMAND --help` shows the same text as below."),
        ".SH COMMANDS",
    ]
    for name, helptext, sub in _subcommands(parser):
        lines += _command(f"{prog} {name}", helptext, sub)
    lines += [".SH EXIT STATUS",
              _words("0 done; 1 refused or failed (the message says why); 2 wrong usage; "
                     "65 the journal is corrupt or disagrees with the rules (run); 69 the "
                     "daemon cannot be reached (status, supervisor, watch); 78 configuration "
                     "error (run, config check)."),
              ".SH FILES"]
    for path, what in FILES:
        lines += [".TP", f"\\fI{escape(path)}\\fR", _words(what)]
    lines += [".SH SEE ALSO", _words(
        f"{SEE_ALSO}; {DOC_DIR}/install.md (installing and running the table), "
        f"{DOC_DIR}/faults.md (every fault and the way out), {DOC_DIR}/contracts.md (the "
        f"events the backend receives), {DOC_DIR}/durability.md (the journal) and the other "
        f"documents there, as the Debian package installs them (docs/ in a clone).")]
    return "\n".join(lines) + "\n"
