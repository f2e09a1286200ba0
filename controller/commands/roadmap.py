"""``pokdeng-table roadmap JOURNAL [--shoe N] [--svg FILE] [--json] [--archives [DIR]]``: a
shoe's bead plates, read from the journal (docs/roadmap.md).

Reads the journal only (never writes it, safe while the daemon runs), the way ``journal
export`` does, archived shoes included with ``--archives``. The roadmap is built from the
``shoe_started`` and ``round_result`` events exactly as the table published them. Exit 0, or 1
with one line naming what went wrong: the journal unreadable, no such shoe (with the shoes
there are), a malformed round_result (its seq and field), the output not writable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controller.table.roadmap import Roadmap

PROG = "pokdeng-table roadmap"


class RoadmapCommandError(Exception):
    """Why the command cannot show the roadmap; printed as one line, exit 1."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "roadmap", help="show a shoe's roadmap (bead plates) from the journal",
        description="Show the roadmap of a shoe (default: the latest) from a table journal: "
                    "per Player position one bead per round, blue win / grey lose / green "
                    "tie, outer ring for a flush, yellow dot for a pair. Printed with colours "
                    "on a terminal (plain W/L/T when piped or NO_COLOR is set), or written "
                    "as SVG for a dispute file. Reads the journal only.")
    parser.add_argument("journal", metavar="JOURNAL", help="journal SQLite file")
    parser.add_argument("--shoe", type=int, metavar="N", default=None,
                        help="the shoe number (default: the latest shoe in the journal)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--svg", metavar="FILE", default=None,
                        help="write the roadmap as SVG to FILE ('-' for standard output)")
    output.add_argument("--json", action="store_true",
                        help="print the roadmap as JSON (counts and beads per position)")
    parser.add_argument("--archives", metavar="DIR", nargs="?", const="", default=None,
                        help="include archived shoes (from DIR, default JOURNAL.archive/)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.durability.as_owner import as_owner_of, refused
    from controller.durability.journal import JournalError

    try:
        # root reads a journal, and writes a picture, as who controls their directory
        with as_owner_of(Path(args.journal).absolute().parent, needs=(
                "controller.table.roadmap", "controller.durability.archives.archive")):
            roadmap = read_roadmap(args.journal, args.shoe, args.archives)
        if args.svg is not None:
            from controller.display.roadmap_svg import render_svg
            with as_owner_of(Path(args.svg).absolute().parent, needs=("tempfile",)):
                write_output(args.svg, render_svg(roadmap))
        elif args.json:
            print(json.dumps(roadmap.to_json(), ensure_ascii=False, indent=2))
        else:
            from controller.display.roadmap_text import render_text
            sys.stdout.write(render_text(roadmap, colour=wants_colour(sys.stdout)))
            sys.stdout.flush()
    except BrokenPipeError:
        raise  # the reader went away (| head): the command line's own business
    except (RoadmapCommandError, JournalError, OSError) as exc:
        print(f"{PROG}: {refused(exc)}", file=sys.stderr)
        return 1
    return 0


def wants_colour(stream: Any) -> bool:
    """Colours on a terminal, unless NO_COLOR is set (https://no-color.org) or TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def read_roadmap(journal: str, shoe: int | None, archives: str | None) -> Roadmap:
    """The roadmap of ``shoe`` (None: the latest) from the journal's events."""
    from controller.durability.journal import JournalError
    from controller.table.roadmap import Roadmap, RoadmapError

    roadmap = Roadmap(shoe=shoe)
    shoes: set[int] = set()
    try:
        for event in _roadmap_events(journal, archives):
            number = event.get("shoe")
            if isinstance(number, int) and not isinstance(number, bool):
                shoes.add(number)
            if shoe is None or number == shoe:
                roadmap.add(event)
    except JournalError as exc:
        raise RoadmapCommandError(str(exc)) from None
    except RoadmapError as exc:
        raise RoadmapCommandError(f"{journal}: {exc}") from None
    if not shoes:
        raise RoadmapCommandError(f"{journal}: no shoe in this journal yet"
                                  + _archive_hint(journal, archives))
    if shoe is not None and shoe not in shoes:
        raise RoadmapCommandError(f"{journal}: no shoe {shoe}; it holds shoe"
                                  f"{'s' if len(shoes) > 1 else ''} {number_ranges(shoes)}"
                                  + _archive_hint(journal, archives))
    return roadmap


def _roadmap_events(journal: str, archives: str | None) -> Iterator[dict[str, Any]]:
    """The journal's shoe_started and round_result events, in seq order."""
    from controller.durability.archives.archive import export_with_archives
    from controller.durability.journal import JournalError, export_events

    bodies = export_events(journal) if archives is None else \
        export_with_archives(journal, archives or None)
    for body in bodies:
        # Only two event types matter: skip the JSON parse of every card and tick.
        if "round_result" not in body and "shoe_started" not in body:
            continue
        try:
            event = json.loads(body)
        except ValueError as exc:
            raise JournalError(f"{journal}: an event record is not JSON ({exc}): "
                               f"{body[:80]!r}") from None
        if isinstance(event, dict) and event.get("type") in ("shoe_started", "round_result"):
            yield event


def _archive_hint(journal: str, archives: str | None) -> str:
    """Say where older shoes are when the journal has moved some into archives."""
    if archives is not None:
        return ""
    from controller.durability.journal import JournalError, open_read_only, read_base

    try:
        conn = open_read_only(journal)
        try:
            archived = read_base(conn) is not None
        finally:
            conn.close()
    except (JournalError, OSError, ValueError):
        return ""
    return " (older shoes are archived: add --archives)" if archived else ""


def number_ranges(numbers: set[int]) -> str:
    """{1, 2, 3, 5} -> '1-3, 5'."""
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(first) if first == last else f"{first}-{last}"
                     for first, last in spans)


def write_output(target: str, content: str) -> None:
    """Write ``content`` to ``target`` ('-' = standard output) whole or not at all."""
    if target == "-":
        sys.stdout.write(content)
        sys.stdout.flush()
        return
    import tempfile

    path = Path(target)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                    dir=path.parent if str(path.parent) else ".")
    except OSError as exc:
        raise RoadmapCommandError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(content)
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, path)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise RoadmapCommandError(f"cannot write {target}: {exc.strerror or exc}") from None


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
