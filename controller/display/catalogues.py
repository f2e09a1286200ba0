"""The screens' words as gettext catalogues: one ``<language>.po`` file per language, found on
a search path and read with Babel.

Where the files are (the first directory holding a language wins, so an operator's file can
also correct a packaged language):

1. the directories in ``POKDENG_TABLE_LOCALES`` (``:``-separated; a trial, the tests);
2. ``/usr/local/share/pokdeng-table/locales`` (the operator's: the package never writes there,
   and every user of the table — the daemon, the screens, ``watch`` — can read it);
3. the package's own, ``controller/display/locales``.

A catalogue's msgids are the words' keys (``seat.P``), its msgstrs the words, with the same
``{name}`` placeholders as English (``en.po``, the source). Its header names the language
(``Language: fil``, the same as the file's name); ``language`` is its name in itself and
``language.direction`` is ``ltr`` or ``rtl`` (as GTK's ``default:LTR``: a translator sets it in
any PO editor). A file that breaks any of this is not offered, and ``problems`` says why, by file
and line: the table's config names it when ``display.language`` asks for it.

Every catalogue is checked against the package's own English (the keys and placeholders the
code uses), an operator's ``en.po`` too: one that is not whole is not used, and the package's
English is, so a broken correction never leaves the daemon, its screens or ``watch`` without
words. A catalogue that only lacks words English has (an operator's language after an upgrade
added keys) is offered with those words in English, each named in ``Loaded.behind``: a
display word never stops the table. A key given twice is refused (msgfmt refuses it too;
Babel would silently keep the last). Only a regular file of at most ``MAX_BYTES`` is read
(a FIFO planted at ``th.po`` would hang every reader at its open, a link to ``/dev/zero``
would be read for ever), and a word with a control character (an escape sequence ``watch``
would send to the terminal, a line break that would split its one line per change) is
refused.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from controller.regular_file import open_regular

ENV = "POKDENG_TABLE_LOCALES"
OPERATOR_DIR = Path("/usr/local/share/pokdeng-table/locales")
PACKAGED_DIR = Path(__file__).resolve().parent / "locales"
SOURCE = "en"  # the catalogue every other one is checked against
DIRECTIONS = ("ltr", "rtl")
PLACEHOLDER = re.compile(r"\{(\w+)\}")
_CODE = re.compile(r"^[a-z]{2,3}(?:_[A-Za-z0-9]{2,8})*$")
#: the largest catalogue read: English is about 11 KB, a language's twice that at most
MAX_BYTES = 1 << 20


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def search_path() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    return [*extra, OPERATOR_DIR, PACKAGED_DIR]


def catalogue_files() -> dict[str, Path]:
    """Each language on the search path and its file (``fil`` -> ``…/fil.po``), without
    reading any: what ``watch``'s parser offers, cheaply."""
    found: dict[str, Path] = {}
    for directory in search_path():
        try:
            names = sorted(os.listdir(directory))
        except OSError:  # a directory that is not there (or not ours to read) adds nothing
            continue
        for name in names:
            code, dot, ext = name.rpartition(".")
            if dot and ext == "po" and _CODE.match(code):
                found.setdefault(code, directory / name)
    return found


def ordered(codes: object) -> tuple[str, ...]:
    """English first (the source), then the others by code."""
    return tuple(sorted(codes, key=lambda c: (c != SOURCE, c)))  # type: ignore[call-overload]


@dataclass(frozen=True)
class Catalogue:
    code: str
    name: str  # in English: the header's Language-Team
    words: dict[str, str]
    rtl: bool
    path: Path


@dataclass
class Loaded:
    """Every catalogue that reads whole, and what is wrong with those that do not."""
    catalogues: dict[str, Catalogue] = field(default_factory=dict)
    problems: dict[str, list[str]] = field(default_factory=dict)
    #: each offered language's keys it lacks, shown in English
    behind: dict[str, list[str]] = field(default_factory=dict)


def read_catalogue(code: str, path: Path) -> tuple[dict[str, str], str, list[str]]:
    """The words of one file, the language's English name, and the file's problems
    (``file:line: what``)."""
    from babel.messages.pofile import read_po

    problems: list[str] = []
    try:
        # a regular file only (a FIFO, a device, a directory: refused at once), bounded
        with os.fdopen(open_regular(path), "rb") as f:
            text = f.read(MAX_BYTES + 1)
        if len(text) > MAX_BYTES:
            return {}, code, [f"{path}: over {MAX_BYTES:,} bytes: not a catalogue of the "
                              f"screens' words"]
        # a UTF-8 byte order mark (Notepad writes one) is not a PO keyword: Babel refuses it
        catalogue = read_po(io.BytesIO(text.removeprefix(codecs.BOM_UTF8)), abort_invalid=True)
    except Exception as e:  # a syntax error, bad UTF-8, an unreadable file: say it, go on
        return {}, code, [f"{path}: cannot be read as a PO file: {e}"]
    problems += twice_given(path, text.decode("utf-8", errors="replace"))
    said = catalogue.locale_identifier
    if said != code:
        problems.append(f"{path}: its header says Language: {said or '(none)'}, "
                        f"its name says {code}")
    words: dict[str, str] = {}
    for message in catalogue:
        if not message.id:
            continue  # the header
        where = f"{path}:{message.lineno}"
        if not isinstance(message.id, str) or not isinstance(message.string, str):
            problems.append(f"{where}: {message.id!r} has plural forms; the screens use none")
        elif message.fuzzy:
            problems.append(f"{where}: {message.id} is marked fuzzy (not yet checked)")
        elif not message.string.strip():
            problems.append(f"{where}: {message.id} has no words")
        elif (control := _control(message.string)) is not None:
            problems.append(f"{where}: {message.id} has a control character "
                            f"(U+{ord(control):04X}): a terminal would act on it")
        else:
            words[message.id] = message.string
    team = dict(catalogue.mime_headers).get("Language-Team", "")
    return words, team.split("<")[0].strip() or words.get("language", code), problems


_KEYWORD = re.compile(r'^(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+"(.*)"\s*$')
_CONTINUATION = re.compile(r'^"(.*)"\s*$')


def twice_given(path: Path, text: str) -> list[str]:
    """Each key (with its msgctxt) given a second time, by file, key and both lines."""
    strings: list[tuple[str, str, int]] = []  # keyword, its string whole, its line
    for lineno, line in enumerate(text.splitlines(), 1):
        if (keyword := _KEYWORD.match(line.strip())) is not None:
            strings.append((keyword[1], keyword[2], lineno))
        elif strings and (more := _CONTINUATION.match(line.strip())) is not None:
            kind, value, at = strings[-1]
            strings[-1] = (kind, value + more[1], at)
    seen: dict[tuple[str | None, str], int] = {}
    problems, context = [], None
    for kind, value, lineno in strings:
        if kind == "msgctxt":
            context = value
        elif kind == "msgid":
            key, context = (context, value), None
            if key == (None, ""):
                continue  # the header
            if key in seen:
                problems.append(f"{path}:{lineno}: {value} is given twice (lines {seen[key]} "
                                f"and {lineno}): msgfmt refuses the file")
            else:
                seen[key] = lineno
    return problems


def _control(text: str) -> str | None:
    """The first control character in ``text`` (an escape, a line break, a NUL), or None;
    a zero-width non-joiner (Persian) is a format character, not a control."""
    return next((c for c in text if unicodedata.category(c) == "Cc"), None)


def check_against(code: str, path: Path, words: dict[str, str],
                  source: dict[str, str]) -> list[str]:
    """No key the source lacks, the same placeholders; a direction (a key it lacks is no
    problem: ``behind``)."""
    problems = []
    extra = sorted(set(words) - set(source))
    if extra:
        problems.append(f"{path}: has keys English does not: {', '.join(extra)}")
    for key in sorted(set(words) & set(source)):
        if placeholders(words[key]) != placeholders(source[key]):
            problems.append(f"{path}: {key} has placeholders {sorted(placeholders(words[key]))}, "
                            f"English {sorted(placeholders(source[key]))}")
    if words.get("language.direction", source.get("language.direction")) not in DIRECTIONS:
        problems.append(f"{path}: language.direction must be ltr or rtl")
    return problems


def load() -> Loaded:
    """Every catalogue on the search path, each checked against the package's English; an
    English that is not whole gives way to the package's (its problems kept)."""
    loaded = Loaded()
    files = catalogue_files()
    packaged = PACKAGED_DIR / f"{SOURCE}.po"
    source, source_name, problems = read_catalogue(SOURCE, packaged)
    problems += check_against(SOURCE, packaged, source, source)
    if problems:  # the screens cannot speak at all: a packaging fault
        raise RuntimeError("; ".join(problems))
    read = {code: (path, *read_catalogue(code, path)) for code, path in files.items()}
    for code in ordered(read):
        path, words, name, problems = read[code]
        problems += check_against(code, path, words, source)
        if problems:
            loaded.problems[code] = problems
            continue
        lacks = [key for key in source if key not in words]
        if lacks:
            loaded.behind[code] = lacks
        words = {key: words.get(key, english) for key, english in source.items()}
        loaded.catalogues[code] = Catalogue(
            code, name, words, words["language.direction"] == "rtl", path)
    if SOURCE not in loaded.catalogues:  # an operator's English that is not whole
        loaded.catalogues[SOURCE] = Catalogue(SOURCE, source_name, source,
                                              source["language.direction"] == "rtl", packaged)
        loaded.catalogues = {code: loaded.catalogues[code] for code in ordered(loaded.catalogues)}
    return loaded
