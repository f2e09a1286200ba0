"""``pokdeng-table journal verify|export|archive FILE``: check, print and archive a journal."""

from __future__ import annotations

import argparse
import sys

from controller.service.private_files import creates_private_files


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "journal", help="check, export or archive a table journal",
        description="Check a journal's hash chain (with its archives), print its events as "
                    "JSON Lines, or archive closed shoes out of it.")
    actions = parser.add_subparsers(dest="journal_action", metavar="ACTION", required=True)

    verify = actions.add_parser(
        "verify", help="check the hash chain, archives included (exit 0 when it holds, 1 "
                       "naming the first bad record or the missing/damaged archive)")
    verify.add_argument("file", metavar="FILE", help="journal SQLite file")
    verify.add_argument("--archives", metavar="DIR", default=None,
                        help="the journal's archive directory (default: FILE.archive/)")
    verify.set_defaults(func=_verify)

    export = actions.add_parser("export", help="print every event as JSON Lines, in seq order")
    export.add_argument("file", metavar="FILE", help="journal SQLite file")
    export.add_argument("--archives", metavar="DIR", nargs="?", const="", default=None,
                        help="include archived events first (from DIR, default FILE.archive/)")
    export.set_defaults(func=_export)

    archive = actions.add_parser(
        "archive", help="move closed, delivered shoes older than a given age into archives",
        description="Archive every shoe whose shoe_ended is older than --older-than and whose "
                    "events every transport has delivered: gzip JSON Lines in FILE.archive/ "
                    "(or --archives DIR), then removed from the live journal. Safe while the "
                    "daemon runs.")
    archive.add_argument("file", metavar="FILE", help="journal SQLite file")
    archive.add_argument("--older-than", metavar="DURATION", required=True,
                         help="retention age: 7d, 12h, 30m, 90s, 2w")
    archive.add_argument("--archives", metavar="DIR", default=None,
                         help="archive directory (default: FILE.archive/)")
    archive.add_argument("--config", metavar="CONFIG", default=None,
                         help="the table's config (its table settings replay the journal; "
                              "default: read from the journal's events)")
    archive.set_defaults(func=_archive)


@creates_private_files
def _verify(args: argparse.Namespace) -> int:
    from controller.durability.archive import verify_with_archives
    from controller.durability.journal import JournalError

    try:
        result = verify_with_archives(args.file, args.archives)
    except JournalError as exc:
        print(f"pokdeng-table journal verify: {exc}", file=sys.stderr)
        return 1
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if result.ok:
        print(f"{args.file}: {result.describe()}")
        return 0
    print(f"{args.file}: BROKEN at {result.describe()} "
          f"({result.records} records checked before it)", file=sys.stderr)
    return 1


@creates_private_files
def _export(args: argparse.Namespace) -> int:
    from controller.durability.archive import export_with_archives
    from controller.durability.journal import JournalError, export_events

    try:
        out = sys.stdout
        bodies = export_events(args.file) if args.archives is None else \
            export_with_archives(args.file, args.archives or None)
        for body in bodies:
            out.write(body + "\n")
        out.flush()
    except JournalError as exc:
        print(f"pokdeng-table journal export: {exc}", file=sys.stderr)
        return 1
    return 0


@creates_private_files
def _archive(args: argparse.Namespace) -> int:
    from controller.durability.archive import archive_closed_shoes, parse_duration
    from controller.durability.journal import JournalError

    try:
        older_than = parse_duration(args.older_than)
    except ValueError as exc:
        print(f"pokdeng-table journal archive: --older-than: {exc}", file=sys.stderr)
        return 2
    settings = None
    if args.config:
        from controller.service.config import ConfigError, load_config
        try:
            settings = load_config(args.config).machine_settings()
        except (ConfigError, ValueError) as exc:
            print(f"pokdeng-table journal archive: {exc}", file=sys.stderr)
            return 78
    try:
        result = archive_closed_shoes(args.file, older_than, settings=settings,
                                      archive_dir=args.archives)
    except JournalError as exc:
        print(f"pokdeng-table journal archive: {exc}", file=sys.stderr)
        return 1
    print(f"{args.file}: {result.describe()}")
    return 0
