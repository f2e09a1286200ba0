"""``pokdeng-table journal verify FILE`` and ``pokdeng-table journal export FILE``."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "journal", help="check or export a table journal",
        description="Check a journal's hash chain, or print its events as JSON Lines.")
    actions = parser.add_subparsers(dest="journal_action", metavar="ACTION", required=True)

    verify = actions.add_parser(
        "verify", help="check the hash chain (exit 0 when it holds, 1 naming the first bad record)")
    verify.add_argument("file", metavar="FILE", help="journal SQLite file")
    verify.set_defaults(func=_verify)

    export = actions.add_parser("export", help="print every event as JSON Lines, in seq order")
    export.add_argument("file", metavar="FILE", help="journal SQLite file")
    export.set_defaults(func=_export)


def _verify(args: argparse.Namespace) -> int:
    from controller.journal import JournalError, verify_file

    try:
        result = verify_file(args.file)
    except JournalError as exc:
        print(f"pokdeng-table journal verify: {exc}", file=sys.stderr)
        return 1
    if result.ok:
        print(f"{args.file}: {result.describe()}")
        return 0
    print(f"{args.file}: BROKEN at {result.describe()} "
          f"({result.records} records checked before it)", file=sys.stderr)
    return 1


def _export(args: argparse.Namespace) -> int:
    from controller.journal import JournalError, export_events

    try:
        out = sys.stdout
        for body in export_events(args.file):
            out.write(body + "\n")
        out.flush()
    except JournalError as exc:
        print(f"pokdeng-table journal export: {exc}", file=sys.stderr)
        return 1
    return 0
