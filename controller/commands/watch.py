"""``pokdeng-table watch``: the dealer's view — live, what to do next.

"burn 6 more", "deal card 3 of 12: Player 3, first card", "betting closes in 4 s", "PAUSED —
call the supervisor — …", in the table's language (``--lang``, or ``display.language``). On a
terminal the screen is redrawn in place; otherwise one line is printed per change (for a log or
a second screen). Persian (any right-to-left catalogue) is shaped and reordered for a terminal,
and left in typing order otherwise (``--rtl``: controller/commands/terminal_bidi.py). While
the table is paused the countdown is not counted: it says paused, frozen. Built from the
sealed status only, so it never shows a card before betting closed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from controller.display.catalogues import catalogue_files, ordered
from controller.service.control.client import (
    EX_UNAVAILABLE,
    ControlClient,
    add_socket_arguments,
    client_command,
    socket_path,
)

CLEAR = "\x1b[H\x1b[2J"
EX_USAGE = 64  # sysexits.h: a --lang whose catalogue is not offered


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "watch", help="dealer view: live, what to do next",
        description="Follow the table live and show the dealer what to do next.")
    add_socket_arguments(parser)
    parser.add_argument("--once", action="store_true", help="print the current view and exit")
    # the catalogue files' names: building the parser reads no catalogue
    parser.add_argument("--lang", choices=ordered(catalogue_files()), default=None,
                        help="the words' language (default: the config's display.language "
                             "with --config, else en)")
    parser.add_argument("--rtl", choices=("visual", "logical"), default=None,
                        help="how a right-to-left language (Persian) is printed: visual, "
                             "shaped and reordered for a terminal to show as it reads (the "
                             "default on a terminal), or logical, in typing order (the "
                             "default when the output is not a terminal: a log, a pipe, a "
                             "program that lays out text itself)")
    parser.set_defaults(func=watch)


def betting_seconds_left(status: dict[str, Any]) -> float | None:
    """Table seconds until betting closes, when betting is open and the clock is known."""
    from controller.table.views import seconds_left_now

    now = status.get("now")
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        return None
    return seconds_left_now(status, float(now))


def next_step(status: dict[str, Any], lang: str = "en") -> str:
    """The one thing the dealer should do now, in plain words: the dealer display's own step
    (``controller.display.words.step``), with what paused the table and inputs held."""
    from controller.display import words

    text = words.step_words(lang, status)
    if status.get("storage_fault") or status.get("paused"):
        text += " — " + words.say(lang, f"fault.{words.fault_key(status)}")
        held = status.get("held_inputs") or 0
        if held:
            text += " (" + words.say(lang, "watch.held", n=held) + ")"
    return text


def dealer_view(status: dict[str, Any], lang: str = "en") -> list[str]:
    """The lines of the dealer screen, in ``lang`` (en, fil, ms, fa, ja)."""
    from controller.display.words import say

    head = say(lang, "watch.head", id=status.get("table", "?"))
    if status.get("shoe") is not None:
        head += " · " + say(lang, "watch.shoe", n=status["shoe"])
    if status.get("round") is not None:
        head += " · " + say(lang, "watch.round", n=status["round"])
    if status.get("last_round"):
        head += " · " + say(lang, "last_round")
    lines = [head, f">> {next_step(status, lang)}"]
    left = betting_seconds_left(status)
    if status.get("paused") and status.get("betting_open"):
        # the countdown waits with the table: no seconds that are not running
        lines.append(say(lang, "state.paused") + " · " + say(lang, "clock.frozen"))
    elif left is not None:
        lines.append(say(lang, "watch.closes_in", n=f"{left:.0f}"))
    elif status.get("round") is not None and status.get("betting_open") is False \
            and status.get("state") not in ("ready", "between_rounds"):
        lines.append(say(lang, "clock.closed"))
    if status.get("cards_left") is not None:
        lines.append(say(lang, "watch.cards_left", n=status["cards_left"]))
    lost = [say(lang, f"part.{name}") if name in ("shoe", "panel") else name
            for name, up in (status.get("devices") or {}).items() if up is False]
    if lost:
        lines.append(say(lang, "watch.not_connected", names=", ".join(lost)))
    if status.get("clock_sync") == "not_synchronised":
        lines.append(say(lang, "watch.clock"))
    unreachable = status.get("backends_unreachable") or {}
    if unreachable:  # the table deals on; the backend catches up once it answers
        lines.append(say(lang, "watch.unreachable", names=", ".join(sorted(unreachable))))
    return lines


def shown_view(status: dict[str, Any], lang: str, visual_rtl: bool) -> list[str]:
    """The dealer view's lines as printed: a right-to-left language in visual order when
    ``visual_rtl`` (a terminal), else as typed."""
    lines = dealer_view(status, lang)
    if visual_rtl:
        from controller.display.words import RTL

        if lang in RTL:
            from controller.commands.terminal_bidi import visual_lines

            return visual_lines(lines)
    return lines


def follow(snapshots: Any, out: TextIO, tty: bool, lang: str | None = "en",
           visual_rtl: bool = False) -> None:
    """Render each snapshot: redraw on a terminal, one line per change otherwise; ``lang``
    None: in the language each snapshot names."""
    last = None
    warned: set[str] = set()
    for status in snapshots:
        speaking = language_of(status, lang)
        warn_behind_english(speaking, warned)
        lines = shown_view(status, speaking, visual_rtl)
        if tty:
            out.write(CLEAR + "\n".join(lines) + "\n")
        else:
            text = " | ".join(lines)
            if text == last:
                continue
            last = text
            out.write(text + "\n")
        out.flush()


def table_language(args: argparse.Namespace) -> str | None:
    """``--lang``, else the table's ``display.language`` when ``--config`` names its config;
    None: the language the table's status names (``language``)."""
    if args.lang:
        return str(args.lang)
    if getattr(args, "config", None):
        from controller.service.config.settings import load_config

        try:
            display = load_config(args.config).display
        except Exception:  # the socket path was read from it already; words are not worth a stop
            return None
        return display.language if display is not None else "en"
    return None


def language_of(status: dict[str, Any], asked: str | None) -> str:
    """The language to speak: the one asked for, else the table's own (else English)."""
    from controller.display.words import language

    return language(asked or status.get("language"))


def warn_behind_english(lang: str, warned: set[str]) -> None:
    """Say once which words of the language watch speaks show in English (its catalogue
    lacks them), the first time it speaks it."""
    from controller.display.words import behind_english

    if lang in warned:
        return
    warned.add(lang)
    warning = behind_english(lang)
    if warning is not None:
        print(f"pokdeng-table watch: WARNING: {warning}", file=sys.stderr)


@client_command("watch")
def watch(args: argparse.Namespace) -> int:
    lang = table_language(args)
    if args.lang:  # a catalogue file is there, but was it offered? (not: English, unsaid)
        from controller.display.words import LANGUAGES, PROBLEMS

        if lang not in LANGUAGES:
            print(f"pokdeng-table watch: --lang {lang} cannot be used: "
                  + "; ".join(PROBLEMS.get(str(lang), ["no catalogue"])), file=sys.stderr)
            return EX_USAGE
    client = ControlClient(socket_path(args))
    tty = sys.stdout.isatty()
    visual_rtl = args.rtl == "visual" or (args.rtl is None and tty)
    if args.once:
        status = client.status()
        speaking = language_of(status, lang)
        warn_behind_english(speaking, set())
        print("\n".join(shown_view(status, speaking, visual_rtl)))
        return 0
    follow(client.watch(), sys.stdout, tty, lang, visual_rtl)
    print("pokdeng-table watch: the daemon went away", file=sys.stderr)
    return EX_UNAVAILABLE
