"""``pokdeng-table journal verify|export|archive|compact FILE``: check, print, archive and
compact a journal; ``journal continue``: continue a table's history after its backend's;
``journal new-key FILE``: a new chain key (no other tool needed on the table PC)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from controller.service.private_files import creates_private_files

if TYPE_CHECKING:
    from controller.durability.continuation import BackendEvent
    from controller.durability.delivery.held import Held
    from controller.service.config.settings import Config


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "journal", help="check, export or archive a table journal",
        description="Check a journal's hash chain (with its archives), print its events as "
                    "JSON Lines, or archive closed shoes out of it.")
    actions = parser.add_subparsers(dest="journal_action", metavar="ACTION", required=True)

    verify = actions.add_parser(
        "verify", help="check the hash chain, archives included (exit 0 when it holds, 1 "
                       "naming the first bad record or the missing/damaged archive)",
        description="Check the journal's chain (keyed: with its key, from --key-file, the "
                    "table's --config, the demo's --state-dir or the key file beside FILE), its "
                    "archives, its head file, and with --against what a backend received. "
                    "Exit 0: it holds; 1: the first bad record, archive or difference is "
                    "named; 2: bad arguments or an unreadable key file; 3: a keyed chain and no "
                    "key: its MACs were not checked (with --against: what could be checked "
                    "holds).")
    verify.add_argument("file", metavar="FILE", nargs="?", default=None,
                        help="journal SQLite file (default: the one --config or --state-dir "
                             "names)")
    table = verify.add_mutually_exclusive_group()
    table.add_argument("--config", metavar="FILE", default=None,
                       help="the table's config: its journal, and the key its journal: section "
                            "names (key_file or the credential)")
    table.add_argument("--state-dir", metavar="DIR", default=None,
                       help="a state directory (the demo's): its journal.sqlite, and the key "
                            "file beside it when there is one")
    verify.add_argument("--archives", metavar="DIR", default=None,
                        help="the journal's archive directory (default: FILE.archive/)")
    verify.add_argument("--key-file", metavar="PATH", default=None,
                        help="the chain key of a keyed journal (the table's journal.key_file "
                             "or its credential, decrypted)")
    verify.add_argument("--head", metavar="PATH", default=None,
                        help="the journal's head file (default: FILE.head, when it exists)")
    verify.add_argument("--against", metavar="EVENTS", default=None,
                        help="JSON Lines of the events a backend received (the file sink, or "
                             "an export): each must be in the journal at its anchor, same id "
                             "and body")
    verify.set_defaults(func=_verify)

    export = actions.add_parser(
        "export", help="print every event as JSON Lines, in seq order",
        description="Print every event of the journal as JSON Lines, in seq order, exactly as "
                    "the backends received them (same ids and bodies); with --archives the "
                    "archived shoes come first.")
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
                         help="the table's config (its table settings replay the journal, its "
                              "journal key checks a keyed chain; default: read from the "
                              "journal's events)")
    archive.add_argument("--key-file", metavar="PATH", default=None,
                         help="the chain key of a keyed journal (instead of the config's)")
    archive.set_defaults(func=_archive)

    compact = actions.add_parser(
        "compact", help="give the space of archived records back (the table stopped)",
        description="Rewrite the journal file without its free pages (SQLite VACUUM) and switch "
                    "it to incremental auto-vacuum, so retention gives space back from then on "
                    "while the table runs. Needed once for a journal created before that; "
                    "refused while another process (the table) has the journal open.")
    compact.add_argument("file", metavar="FILE", help="journal SQLite file")
    compact.set_defaults(func=_compact)

    new_key = actions.add_parser(
        "new-key", help="write a new random journal chain key to FILE (mode 0600)",
        description="Write a new random chain key (32 random bytes, as 64 hex digits) to FILE, "
                    "readable by its owner only, for LoadCredential=journal-key:FILE "
                    "(docs/install.md §5). Refused when FILE exists: a key keys the journal "
                    "that was started with it. Exit 0: written; 1: refused or not written.")
    new_key.add_argument("file", metavar="FILE", help="where the key goes, e.g. "
                                                      "/etc/pokdeng-table/credentials/journal-key")
    new_key.set_defaults(func=_new_key)

    resume = actions.add_parser(
        "continue", help="continue a table's history after the seq its backend holds (the "
                         "table stopped; when no copy of its journal is as new)",
        description="For a table refused at start because its backend holds more of its "
                    "history than any copy of its journal (docs/install.md, \"A table whose "
                    "history forked\"): set the journal, its head file and archives aside in "
                    "forked-<time>/ beside them, and start a new journal whose first event is "
                    "the one after the backend's last, with no shoe open. Refused when the "
                    "journal being replaced proves the table got further (its delivery rows, "
                    "archives, head file, or the event's anchor), and unless a configured "
                    "backend confirms the event: HTTP and MQTT backends say where they stand, "
                    "a file transport by its file's last event; each that tells must hold "
                    "exactly up to it, same digest. The next shoe is past the backend's last "
                    "shoe and every shoe the journal set aside names. Without --yes, only says "
                    "what it would do. Exit 0: done (or the plan shown); 1: refused, with why; "
                    "2: bad arguments, or a --backend-event that is no usable event; 78: "
                    "configuration.")
    resume.add_argument("--config", metavar="FILE", required=True,
                        help="the table's config: its journal, key, table settings and backends")
    resume.add_argument("--backend-event", metavar="FILE", required=True,
                        help="the backend's last event of this table, as it stored it (JSON, "
                             "or JSON Lines whose last line it is; when it names no shoe, the "
                             "lines back to one that does)")
    resume.add_argument("--wait", metavar="SECONDS", type=float, default=10.0,
                        help="how long to wait for the backends to say where they stand "
                             "(default 10)")
    resume.add_argument("--unconfirmed", action="store_true",
                        help="continue although no backend can confirm the event (backends "
                             "that cannot answer), or the shoe told only by the lines before "
                             "the last; needs --reason, recorded in the new journal with who "
                             "ran it and when. A backend that answers otherwise still refuses, "
                             "and stops the table when it answers later")
    resume.add_argument("--reason", metavar="TEXT", default=None,
                        help="why it is continued unconfirmed (with --unconfirmed)")
    resume.add_argument("--yes", action="store_true",
                        help="do it (without: show what would be done)")
    resume.set_defaults(func=_continue)


@creates_private_files
def _verify(args: argparse.Namespace) -> int:
    _yield_to_the_table()
    from controller.durability.journal import JournalError
    from controller.service.config.errors import ConfigError
    from controller.service.trust.journal_key import read_key_file
    from controller.transports import TransportConfigError

    try:
        args.file, key = _journal_and_key(args)
        if args.key_file:
            key = read_key_file(args.key_file)
    except (TransportConfigError, ConfigError, ValueError, OSError) as exc:
        print(f"pokdeng-table journal verify: {refused(exc)}", file=sys.stderr)
        return 2
    try:
        with _as_journal_owner(args.file):
            return _verify_journal(args, key)
    except (JournalError, OSError) as exc:
        print(f"pokdeng-table journal verify: {refused(exc)}", file=sys.stderr)
        return 1


def _verify_journal(args: argparse.Namespace, key: bytes | None) -> int:
    """``journal verify`` on the journal's files (run as the controller of their directory)."""
    from controller.durability.archives.archive import verify_with_archives

    if _holds_no_record_yet(args.file):
        print(f"{args.file}: no record yet: the journal was cut while its table was being "
              f"created; the daemon starts it afresh on its next start (nothing was lost: "
              f"nothing had been journaled)")
        return 0
    chain = _chain_description(args.file)
    print(f"{args.file}: chain: {chain}")
    if args.against:
        return _verify_against(args, key, chain)
    if key is None and chain.startswith("keyed"):
        print(f"{args.file}: {MACS_UNCHECKED}", file=sys.stderr)
        return EX_MACS_UNCHECKED
    result = verify_with_archives(args.file, args.archives, key)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if not result.ok:
        print(f"{args.file}: BROKEN at {result.describe()} "
              f"({result.records} records checked before it)", file=sys.stderr)
        return 1
    behind = _head_problem(args, key)
    if behind:
        print(f"{args.file}: BROKEN: {behind}", file=sys.stderr)
        return 1
    print(f"{args.file}: {result.describe()}")
    return 0


#: every verify mode says the same of a keyed chain checked without its key, and exits 3
EX_MACS_UNCHECKED = 3
MACS_UNCHECKED = ("MACs NOT checked: its chain is keyed (HMAC-SHA256) and no key was given or "
                  "found (--key-file, --config, --state-dir, or journal.key beside the "
                  "journal); only its key proves no record was rewritten")


#: what the journal commands run as the owner of the journal's directory (imported before)
#: and the codecs: rfc8785 (a digest, as verify --against computes for an event that differs)
#: encodes keys in UTF-16 through a codec Python loads on first use
JOURNAL_WORK = ("controller.durability.archives.archive", "controller.durability.head_file",
                "controller.durability.checkpoints", "controller.durability.vacuum",
                "controller.durability.delivery.against", "controller.table.machine",
                "controller.durability.continuation_evidence", "encodings.utf_16_be")


def _as_journal_owner(file: str) -> AbstractContextManager[object]:
    """Run as the user who controls the journal's directory (durability/as_owner.py): root
    never works in it through links its owner could have planted."""
    from controller.durability.as_owner import as_owner_of

    return as_owner_of(Path(os.path.abspath(file)).parent, needs=JOURNAL_WORK)


def refused(exc: Exception) -> str:
    """The error's words for the operator; a file refused is named with why (as_owner.py)."""
    from controller.durability import as_owner

    return as_owner.refused(exc)


def _yield_to_the_table() -> None:
    """Walking a whole journal on the table PC: at idle priority, the table goes first."""
    from controller.durability.idle_child import lower_own_priority

    lower_own_priority()


def _journal_and_key(args: argparse.Namespace) -> tuple[str, bytes | None]:
    """The journal to check and its key, from FILE or what --config / --state-dir name."""
    from controller.service.trust.journal_key import KEY_FILE_BESIDE, read_key_file_if_any

    if args.config:
        from controller.service.config.settings import load_config
        from controller.service.trust.journal_key import load_journal_key

        config = load_config(args.config)
        return args.file or config.journal_path, load_journal_key(config)
    if args.state_dir:
        key_file = Path(args.state_dir) / KEY_FILE_BESIDE
        journal = args.file or str(Path(args.state_dir) / "journal.sqlite")
        return journal, read_key_file_if_any(key_file)
    if not args.file:
        raise ValueError("which journal? give FILE, --config FILE or --state-dir DIR")
    beside = Path(args.file).with_name(KEY_FILE_BESIDE)  # the demo keeps its key there
    return args.file, read_key_file_if_any(beside)


def _holds_no_record_yet(path: str) -> bool:
    """An empty file, an SQLite file with no table yet, or a journal whose records table is
    empty and that never archived any: a journal cut before its first record (a power cut
    while the table was created).
    An SQLite file with other tables is not a journal (open_read_only says so)."""
    import os
    import sqlite3

    if not os.path.isfile(path):
        return False
    if os.path.getsize(path) == 0:
        return True
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        tables = {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return True
        if "records" not in tables or conn.execute(
                "SELECT COUNT(*) FROM (SELECT 1 FROM records LIMIT 1)").fetchone()[0]:
            return False
        # an empty live journal whose every record was archived is a journal, not a cut one
        return "meta" not in tables or conn.execute(
            "SELECT COUNT(*) FROM meta WHERE key='archive_base'").fetchone()[0] == 0
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def _chain_description(path: str) -> str:
    from controller.durability.chain import DESCRIPTIONS
    from controller.durability.journal import chain_kind, open_read_only

    conn = open_read_only(path)
    try:
        return DESCRIPTIONS[chain_kind(conn)]
    finally:
        conn.close()


def _head_problem(args: argparse.Namespace, key: bytes | None) -> str | None:
    """The journal against its head file (none there: nothing to say)."""
    from controller.durability.head_file import tail_problem
    from controller.durability.journal import open_read_only, read_chain

    conn = open_read_only(args.file)
    try:
        chain = read_chain(conn, key, args.file)
    finally:
        conn.close()
    return tail_problem(args.file, chain, args.head)


def _verify_against(args: argparse.Namespace, key: bytes | None, chain: str) -> int:
    from controller.durability.delivery.against import verify_against

    result = verify_against(args.file, args.against, args.archives, key)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if not result.ok:
        print(f"{args.file}: DIFFERS from {args.against}: {result.describe()}", file=sys.stderr)
        return 1
    unchecked = key is None and chain.startswith("keyed")
    if not unchecked:
        behind = _head_problem(args, key)
        if behind:
            print(f"{args.file}: BROKEN: {behind}", file=sys.stderr)
            return 1
    print(f"{args.file}: OK against {args.against}: {result.describe()}")
    if unchecked:
        print(f"{args.file}: {MACS_UNCHECKED}", file=sys.stderr)
        return EX_MACS_UNCHECKED
    return 0


@creates_private_files
def _export(args: argparse.Namespace) -> int:
    _yield_to_the_table()
    from controller.durability.archives.archive import export_with_archives
    from controller.durability.journal import JournalError, export_events

    try:
        out = sys.stdout
        shown = terminal_safe if out.isatty() else str
        with _as_journal_owner(args.file):
            bodies = export_events(args.file) if args.archives is None else \
                export_with_archives(args.file, args.archives or None)
            for body in bodies:
                out.write(shown(body) + "\n")
        out.flush()
    except BrokenPipeError:
        raise  # the reader went away (| head): the command line's own business
    except (JournalError, OSError) as exc:
        print(f"pokdeng-table journal export: {refused(exc)}", file=sys.stderr)
        return 1
    return 0


#: C0 and C1 control characters (and DEL): a terminal acts on them (moves, clears, retitles)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def terminal_safe(line: str) -> str:
    """``line`` with every control character written as JSON's \\uXXXX escape: an edited
    record cannot drive the operator's terminal, and the line is still the same JSON value
    (raw C0 characters are not valid JSON at all). Only for a terminal: into a pipe or a
    file, export writes the events byte for byte as the backends received them."""
    return _CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", line)


@creates_private_files
def _archive(args: argparse.Namespace) -> int:
    _yield_to_the_table()
    from controller.durability.archives.archive import archive_closed_shoes, parse_duration
    from controller.durability.journal import JournalError

    try:
        older_than = parse_duration(args.older_than)
    except ValueError as exc:
        print(f"pokdeng-table journal archive: --older-than: {exc}", file=sys.stderr)
        return 2
    from controller.service.trust.journal_key import load_journal_key, read_key_file
    from controller.transports import TransportConfigError

    settings = None
    key = None
    try:
        if args.config:
            from controller.service.config.errors import ConfigError
            from controller.service.config.settings import load_config
            try:
                config = load_config(args.config)
            except (ConfigError, ValueError) as exc:
                print(f"pokdeng-table journal archive: {exc}", file=sys.stderr)
                return 78
            settings = config.machine_settings()
            key = load_journal_key(config)
        if args.key_file:
            key = read_key_file(args.key_file)
    except TransportConfigError as exc:
        print(f"pokdeng-table journal archive: {exc}", file=sys.stderr)
        return 78
    try:
        with _as_journal_owner(args.file):
            result = archive_closed_shoes(args.file, older_than, settings=settings,
                                          archive_dir=args.archives, key=key)
    except (JournalError, OSError) as exc:
        print(f"pokdeng-table journal archive: {refused(exc)}", file=sys.stderr)
        return 1
    print(f"{args.file}: {result.describe()}")
    return 0


def _compact(args: argparse.Namespace) -> int:
    _yield_to_the_table()
    from controller.durability.journal import JournalError
    from controller.durability.vacuum import JournalInUse, compact

    try:
        with _as_journal_owner(args.file):
            before, after = compact(args.file)
    except (JournalError, JournalInUse, OSError) as exc:
        print(f"pokdeng-table journal compact: {refused(exc)}", file=sys.stderr)
        return 1
    print(f"{args.file}: {before:,} -> {after:,} bytes; incremental auto-vacuum from now on")
    return 0


def _new_key(args: argparse.Namespace) -> int:
    from pathlib import Path

    from controller.service.trust.journal_key import make_key_file

    path = Path(args.file)
    if path.exists() or path.is_symlink():
        print(f"pokdeng-table journal new-key: {path} exists; it may key a journal already, so "
              "it is left as it is (move it away first if it keys none)", file=sys.stderr)
        return 1
    try:
        make_key_file(path)
    except OSError as exc:
        print(f"pokdeng-table journal new-key: cannot write {path}: {exc.strerror}",
              file=sys.stderr)
        return 1
    print(f"{path}: new journal key (mode 0600); keep a copy where the audit team keeps its "
          "secrets")
    return 0


@creates_private_files
def _continue(args: argparse.Namespace) -> int:
    from controller.durability.as_owner import as_owner_of
    from controller.durability.continuation import (
        BadBackendEvent,
        ContinueRefused,
        continue_history,
        read_backend_event,
        refuse_if_proven_past,
        refuse_unless_behind,
        shoe_rule,
    )
    from controller.durability.journal import JournalError
    from controller.service.config.errors import ConfigError
    from controller.service.config.settings import load_config
    from controller.service.trust.journal_key import load_journal_key
    from controller.transports import TransportConfigError

    def say(message: str) -> None:
        print(f"pokdeng-table journal continue: {message}", file=sys.stderr)

    reason = (args.reason or "").strip()
    if args.unconfirmed != bool(reason):
        say("--unconfirmed needs --reason TEXT (why no backend can confirm the event), and "
            "--reason goes with --unconfirmed only")
        return 2
    try:
        config = load_config(args.config)
        key = load_journal_key(config)
    except (ConfigError, TransportConfigError, ValueError) as exc:
        say(str(exc))
        return 78
    settings = config.machine_settings()
    try:
        with as_owner_of(Path(args.backend_event).parent):
            text = Path(args.backend_event).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        say(f"--backend-event: {refused(exc)}")
        return 2
    try:
        event = read_backend_event(text, settings.table_id, args.backend_event)
        with _as_journal_owner(config.journal_path):
            refuse_unless_behind(config.journal_path, event)
            refuse_if_proven_past(config.journal_path, key, event)
            shoes = shoe_rule(config.journal_path, event)
        source, silent = _confirmed_by_backends(config, event, args.wait, args.unconfirmed)
    except BadBackendEvent as exc:
        say(f"--backend-event: {exc}; nothing done: bring the backend's last event of this "
            "table exactly as it stored it")
        return 2
    except (ContinueRefused, JournalError, OSError) as exc:
        say(f"{refused(exc)}; nothing done")
        return 1
    if event.shoe_unconfirmed:
        shoe_claim = (f"the backend's last shoe ({event.told_shoe}) is told only by the lines "
                      f"before seq {event.seq}, which no backend confirms")
        if not args.unconfirmed:
            say(f"{shoe_claim} (an edited one would have a shoe number dealt again); nothing "
                f"done: hand in the backend's last event that names a shoe, or, when the "
                f"lines are the backend's as stored, continue with --unconfirmed --reason "
                f"TEXT (recorded in the new journal)")
            return 1
        silent = f"{silent}; {shoe_claim}" if silent else shoe_claim
    unconfirmed = ({"by": invoking_user(), "reason": reason, "what": silent}
                   if silent is not None else None)
    confirmed = (f"confirmed by {source}" if unconfirmed is None else
                 f"UNCONFIRMED ({silent}), recorded in the new journal as run by "
                 f"{unconfirmed['by']}: {reason}")
    plan = (f"table {settings.table_id}: set {config.journal_path} (and its WAL, head file and "
            f"archives) aside in forked-<time>/ beside it, and start a new journal whose first "
            f"event is seq {event.seq + 1}, after the backend's seq {event.seq} ({confirmed}); "
            f"{shoes.describe()}")
    if not args.yes:
        print(f"would {plan}.\nNothing done yet: run again with --yes, the table stopped.")
        return 0
    try:
        with _as_journal_owner(config.journal_path):
            done = continue_history(config.journal_path, key, event, source, settings,
                                    unconfirmed=unconfirmed)
    except ContinueRefused as exc:
        say(f"{exc}; nothing done")
        return 1
    except (JournalError, OSError) as exc:
        say(refused(exc))
        return 1
    if done.set_aside is not None:
        print(f"set aside in {done.set_aside}: {', '.join(done.moved)} (keep them for the "
              "audit)")
    print(f"{config.journal_path}: a new journal; its first event will be seq "
          f"{event.seq + 1} ({confirmed}). Start the table: {done.shoes.describe()}.")
    return 0


def invoking_user() -> str:
    """Who ran the command: the user behind sudo when run under it, else the process's."""
    import os
    import pwd

    if os.geteuid() == 0 and os.environ.get("SUDO_USER"):
        return os.environ["SUDO_USER"]
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid {os.getuid()}"


def _file_position_as_owner(path: str, table: str, name: str, wait: float) -> Held | None:
    """A file transport's file read as the user who controls its directory (that user may
    have put a link, a FIFO or a device at its name: only a regular file is read, and the
    read is given up after ``wait`` seconds, as a backend that does not answer)."""
    import threading

    from controller.durability.as_owner import as_owner_of
    from controller.durability.continuation_evidence import file_position

    found: list[Held | None | Exception] = []

    def read() -> None:
        try:
            found.append(file_position(path, table, name))
        except (ValueError, OSError) as exc:
            found.append(exc)

    with as_owner_of(Path(os.path.abspath(path)).parent, needs=JOURNAL_WORK):
        reader = threading.Thread(target=read, daemon=True, name=f"read-{name}")
        reader.start()
        reader.join(wait)
    if not found:
        raise ValueError(f"{path}: not read within {wait:g} s")
    if isinstance(found[0], Exception):
        raise found[0]
    return found[0]


def _confirmed_by_backends(config: Config, event: BackendEvent, wait: float,
                           unconfirmed: bool) -> tuple[str, str | None]:
    """Every configured backend that tells where it stands (HTTP, MQTT: asked; a file
    transport: its file's last event) must hold exactly up to ``event``, same digest. The
    names of those that confirmed it, and None, or with ``unconfirmed`` what could not
    confirm it (ContinueRefused without it)."""
    from controller.durability.continuation import ContinueRefused, agreeing_position
    from controller.service.startup.parts import build_transports
    from controller.service.trust.history_guard import HistoryGuard

    transports = build_transports(config)
    asked = [t for t in transports if t.kind != "file"]  # a file is read below, as its owner
    # only hears (its thread, which would compare with the journal, is never started): as
    # root, who may read the backends' secrets and certificates
    guard = HistoryGuard(config.journal_path, on_fork=lambda _problem: None,
                         notes_who_told=False)
    guard.watch(asked)
    try:
        answers, _ = guard.hear(asked, wait)
    finally:
        for transport in transports:
            transport.close()
    # an answer that could not be read confirms nothing either
    cannot = [f"{t.name}: no answer on where it stands within {wait:g} s"
              for t in asked if t.tells_held and t.name not in answers]
    for sink in (t for t in transports if t.kind == "file"):
        try:
            held = _file_position_as_owner(sink.path, config.table.table_id, sink.name, wait)
        except (ValueError, OSError) as exc:
            cannot.append(f"{sink.name}: {refused(exc)}")
            continue
        if held is None:
            cannot.append(f"{sink.name}: {sink.path} holds no event yet")
        else:
            answers[sink.name] = held
    agreeing_position(event, answers)  # one that answers otherwise refuses it, always
    if not cannot and answers:
        return ",".join(sorted(answers)), None
    why = "; ".join(cannot) or "no backend is configured"
    if unconfirmed:
        return ",".join(sorted(answers)) or "unconfirmed", why
    confirmed = f" (only {', '.join(sorted(answers))} did)" if answers else ""
    raise ContinueRefused(
        f"not every configured backend can confirm seq {event.seq}{confirmed}: {why}; "
        "continuing unconfirmed could lose or repeat ids: try again when they answer. Only "
        "for a backend that cannot say where it stands at all, continue with --unconfirmed "
        "--reason TEXT (recorded in the new journal with who ran it and when)")
