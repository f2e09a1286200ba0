"""A hostile or broken catalogue on the locales search path (controller/display/catalogues.py):
what an operator's directory, or a trial one in ``POKDENG_TABLE_LOCALES``, may hold where a
``.po`` file should be. Each case loads the words in a real interpreter of its own, as the
daemon, its screens and ``watch`` do at start, with that directory first on the path: the load
must end, offer the languages that read whole and name what is wrong with the others.
"""

from __future__ import annotations

import grp
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from controller.display import catalogues, words

#: a guard against a load that hangs (a FIFO's open waits for a writer for ever), not a
#: measure: a load takes well under a second
LOAD_GUARD_S = 120

_REPORT = """
import json
from controller.display import words
print(json.dumps({"languages": list(words.LANGUAGES), "problems": words.PROBLEMS,
                  "en": words.EN, "rtl": sorted(words.RTL), "behind": words.BEHIND_ENGLISH}))
"""


def load_with(directory: Path) -> dict[str, Any]:
    """The words as a new process loads them with ``directory`` first on the search path."""
    env = {**os.environ, catalogues.ENV: str(directory)}
    done = subprocess.run([sys.executable, "-c", _REPORT], env=env, capture_output=True,
                          text=True, timeout=LOAD_GUARD_S)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def write_catalogue(path: Path, code: str, own: dict[str, str]) -> Path:
    """``path`` as a translator's tool writes a catalogue: English's keys, ``own`` words."""
    catalogue = Catalog(locale=None, project="pokdeng-table", language_team="Thai",
                        revision_date=datetime.now(UTC), fuzzy=False)
    catalogue.mime_headers = [*catalogue.mime_headers, ("Language", code)]
    for key, text in {**words.EN, "language.direction": "ltr", **own}.items():
        catalogue.add(key, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        write_po(f, catalogue, width=0)
    return path


def control_section(directory: Path) -> str:
    """A control section whose supervisor group exists here (this process's own)."""
    return (f"control: {{socket: {directory / 'control.sock'}, "
            f"supervisor_group: {grp.getgrgid(os.getgid()).gr_name}}}\n")


def test_a_fifo_where_a_catalogue_should_be_is_refused_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "th.po")
    loaded = load_with(tmp_path)
    assert "th" not in loaded["languages"]
    assert "not a regular file" in " ".join(loaded["problems"]["th"])
    assert set(loaded["languages"]) >= {"en", "fil", "ms", "fa", "ja"}


def test_a_link_to_a_device_is_refused_not_read_for_ever(tmp_path: Path) -> None:
    (tmp_path / "th.po").symlink_to("/dev/zero")
    loaded = load_with(tmp_path)
    assert "th" not in loaded["languages"]
    assert "th" in loaded["problems"]


def test_a_directory_named_as_a_catalogue_is_refused(tmp_path: Path) -> None:
    (tmp_path / "th.po").mkdir()
    loaded = load_with(tmp_path)
    assert "th" not in loaded["languages"] and "th" in loaded["problems"]


def test_a_link_to_a_whole_catalogue_elsewhere_is_read(tmp_path: Path) -> None:
    real = write_catalogue(tmp_path / "shared" / "th.po", "th", {"seat.banker": "เจ้ามือ"})
    (tmp_path / "locales").mkdir()
    (tmp_path / "locales" / "th.po").symlink_to(real)
    loaded = load_with(tmp_path / "locales")
    assert "th" in loaded["languages"], loaded["problems"]


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    path = write_catalogue(tmp_path / "th.po", "th", {})
    with open(path, "a", encoding="utf-8") as f:
        f.write(("# padding\n" * 1024) * (catalogues.MAX_BYTES // 10240 + 1))
    loaded = load_with(tmp_path)
    assert "th" not in loaded["languages"]
    assert "bytes" in " ".join(loaded["problems"]["th"])


@pytest.mark.parametrize("hostile", ["\x1b[2J\x1b]0;owned\x07Banker", "Banker\nTable stopped",
                                     "Bank\x00er", "Bank\x9ber"])
def test_a_word_with_a_control_character_is_refused(tmp_path: Path, hostile: str) -> None:
    """An escape sequence would reach the dealer's terminal through ``watch``, a line break
    would split its one line per change into two (a log reader sees a line never said)."""
    write_catalogue(tmp_path / "th.po", "th", {"seat.banker": hostile})
    loaded = load_with(tmp_path)
    assert "th" not in loaded["languages"]
    assert "seat.banker has a control character" in " ".join(loaded["problems"]["th"])


def test_a_persian_zero_width_non_joiner_is_not_a_control(tmp_path: Path) -> None:
    write_catalogue(tmp_path / "th.po", "th", {"seat.banker": "بانک\u200cدار"})
    assert "th" in load_with(tmp_path)["languages"]


@pytest.mark.parametrize("broken", ["fuzzy", "placeholders", "not_po"])
def test_an_operators_english_that_is_not_whole_gives_way_to_the_packaged_one(
        tmp_path: Path, broken: str) -> None:
    """An ``en.po`` in the operator's directory corrects English; one that is not whole (a
    fuzzy entry, a placeholder lost, not a PO file) must not leave the daemon,
    its screens and ``watch`` without words (it stopped them at import), nor become the
    measure every other language is checked against."""
    path = write_catalogue(tmp_path / "en.po", "en", {})
    text = path.read_text(encoding="utf-8")
    if broken == "fuzzy":
        text = text.replace('msgid "seat.banker"', '#, fuzzy\nmsgid "seat.banker"')
    elif broken == "placeholders":
        text = text.replace('msgstr "Round {n} cancelled', 'msgstr "Round cancelled')
    else:
        text = "this is not a catalogue\n\"\n"
    path.write_text(text, encoding="utf-8")
    loaded = load_with(tmp_path)
    assert loaded["en"] == words.EN
    assert "en" in loaded["problems"]
    assert set(loaded["languages"]) == {"en", "fil", "ms", "fa", "ja"}


def test_an_operators_english_a_word_behind_takes_that_word_from_the_package(
        tmp_path: Path) -> None:
    path = write_catalogue(tmp_path / "en.po", "en", {"seat.banker": "Dealer"})
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('msgid "winner.pok"\nmsgstr "Pok {v}"\n', ""),
                    encoding="utf-8")
    loaded = load_with(tmp_path)
    assert "en" not in loaded["problems"] and loaded["behind"] == {"en": ["winner.pok"]}
    assert loaded["en"]["winner.pok"] == words.EN["winner.pok"]
    assert loaded["en"]["seat.banker"] == "Dealer"


def test_an_operators_whole_english_corrects_the_words(tmp_path: Path) -> None:
    write_catalogue(tmp_path / "en.po", "en", {"seat.banker": "Dealer"})
    loaded = load_with(tmp_path)
    assert loaded["en"]["seat.banker"] == "Dealer"
    assert "en" not in loaded["problems"]
    assert set(loaded["languages"]) == {"en", "fil", "ms", "fa", "ja"}


def test_watch_says_why_it_cannot_speak_a_language_whose_catalogue_is_refused(
        tmp_path: Path) -> None:
    """``--lang th`` is offered by the file's name alone (the parser reads no catalogue); a
    ``th.po`` that is not whole must not give the dealer English unsaid."""
    write_catalogue(tmp_path / "th.po", "th", {"seat.banker": "เจ้ามือ\x1b[2J"})
    done = subprocess.run(
        [sys.executable, "-m", "controller", "watch", "--socket", str(tmp_path / "none.sock"),
         "--once", "--lang", "th"], env={**os.environ, catalogues.ENV: str(tmp_path)},
        capture_output=True, text=True, timeout=LOAD_GUARD_S)
    assert done.returncode == 64, done
    assert "--lang th cannot be used" in done.stderr
    assert "seat.banker has a control character" in done.stderr


def test_a_catalogue_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """A text editor on Windows (Notepad) saves UTF-8 with a byte order mark; the words are
    the same, and the docs say any text editor will do."""
    path = write_catalogue(tmp_path / "th.po", "th", {"seat.banker": "เจ้ามือ"})
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    loaded = load_with(tmp_path)
    assert "th" in loaded["languages"], loaded["problems"]


def test_a_language_a_word_behind_english_does_not_stop_the_table(tmp_path: Path) -> None:
    path = write_catalogue(tmp_path / "locales" / "th.po", "th", {"seat.banker": "เจ้ามือ"})
    text = path.read_text(encoding="utf-8")
    entry = f'msgid "winner.pok"\nmsgstr "{words.EN["winner.pok"]}"\n'
    assert entry in text
    path.write_text(text.replace(entry, ""), encoding="utf-8")
    config = tmp_path / "table.yaml"
    config.write_text(f"table: {{id: T1}}\nstate_dir: {tmp_path / 'state'}\n"
                      "shoe: {driver: beetek, url: /dev/null}\n"
                      "display: {listen: '127.0.0.1:0', language: th}\n"
                      + control_section(tmp_path))
    done = subprocess.run([sys.executable, "-m", "controller", "config", "check", str(config)],
                          env={**os.environ, catalogues.ENV: str(tmp_path / "locales")},
                          capture_output=True, text=True, timeout=LOAD_GUARD_S)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"WARNING: the th catalogue ({path}) lacks 1 of English's words, shown in " \
        "English: winner.pok" in done.stderr, done.stderr
    loaded = load_with(tmp_path / "locales")
    assert "th" in loaded["languages"] and "th" not in loaded["problems"]


_WATCH_TWO_CHANGES = """
import sys
from controller.commands.watch import follow
statuses = [{"state": "ready", "language": "th", "shoe": 1},
            {"state": "no_shoe", "language": "th", "shoe": None}]
follow(iter(statuses), sys.stdout, False, None)
"""


def test_watch_says_once_which_words_of_its_language_show_in_english(tmp_path: Path) -> None:
    path = write_catalogue(tmp_path / "th.po", "th", {"seat.banker": "เจ้ามือ"})
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(f'msgid "state.ready"\nmsgstr "{words.EN["state.ready"]}"\n',
                                 ""), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", _WATCH_TWO_CHANGES],
                          env={**os.environ, catalogues.ENV: str(tmp_path)},
                          capture_output=True, text=True, timeout=LOAD_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("WARNING") == 1, done.stderr
    assert "the th catalogue" in done.stderr and "English: state.ready" in done.stderr
    assert len(done.stdout.splitlines()) == 2  # it went on speaking, both changes


def test_a_language_with_a_broken_word_is_still_refused(tmp_path: Path) -> None:
    write_catalogue(tmp_path / "locales" / "th.po", "th", {"winner.pok": "ป๊อก"})
    config = tmp_path / "table.yaml"
    config.write_text(f"table: {{id: T1}}\nstate_dir: {tmp_path / 'state'}\n"
                      "shoe: {driver: beetek, url: /dev/null}\n"
                      "display: {listen: '127.0.0.1:0', language: th}\n"
                      + control_section(tmp_path))
    done = subprocess.run([sys.executable, "-m", "controller", "config", "check", str(config)],
                          env={**os.environ, catalogues.ENV: str(tmp_path / "locales")},
                          capture_output=True, text=True, timeout=LOAD_GUARD_S)
    assert done.returncode == 78, done.stdout + done.stderr
    assert "winner.pok has placeholders [], English ['v']" in done.stderr, done.stderr


def test_config_check_warns_of_an_english_set_aside(tmp_path: Path) -> None:
    path = write_catalogue(tmp_path / "locales" / "en.po", "en", {})
    path.write_text(path.read_text(encoding="utf-8").replace(
        'msgid "seat.banker"', '#, fuzzy\nmsgid "seat.banker"'), encoding="utf-8")
    config = tmp_path / "table.yaml"
    config.write_text(f"table: {{id: T1}}\nstate_dir: {tmp_path / 'state'}\n"
                      "shoe: {driver: beetek, url: /dev/null}\n"
                      "display: {listen: '127.0.0.1:0', language: en}\n"
                      + control_section(tmp_path))
    done = subprocess.run([sys.executable, "-m", "controller", "config", "check", str(config)],
                          env={**os.environ, catalogues.ENV: str(tmp_path / "locales")},
                          capture_output=True, text=True, timeout=LOAD_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert "WARNING: the screens speak the package's English" in done.stderr
    assert "seat.banker is marked fuzzy" in done.stderr
