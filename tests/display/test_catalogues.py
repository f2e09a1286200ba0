"""The screens' words as gettext catalogues (controller/display/catalogues.py): each packaged
``.po`` file passes ``msgfmt --check`` as a translator's tool reads it, says English's words in
its comments, and loads whole; a language an operator adds is one file on the search path;
a broken file is named by file, line and key, and costs no other language."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from controller.display import catalogues, words
from support.pseudo_locale import CODE, pseudo_words, write_catalogue

PACKAGED = sorted(catalogues.PACKAGED_DIR.glob("*.po"))


def test_the_packaged_languages_are_the_files_and_all_load_whole() -> None:
    assert {p.stem for p in PACKAGED} == {"en", "fil", "ms", "fa", "ja"}
    assert set(words.LANGUAGES) >= {p.stem for p in PACKAGED} and words.LANGUAGES[0] == "en"
    assert words.PROBLEMS == {}
    assert words.RTL == {"fa"}
    assert words.LANGUAGE_NAMES["fil"] == "Filipino" and words.LANGUAGE_NAMES["ja"] == "Japanese"


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="msgfmt is missing "
                    "(apt-get install gettext)")
@pytest.mark.parametrize("path", PACKAGED, ids=lambda p: p.name)
def test_msgfmt_checks_every_catalogue_without_a_word(path: Path, tmp_path: Path) -> None:
    done = subprocess.run(["msgfmt", "--check", "--statistics", "-o", str(tmp_path / "x.mo"),
                           str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "fuzzy" not in done.stderr and "untranslated" not in done.stderr, done.stderr
    assert "warning" not in done.stderr, done.stderr


@pytest.mark.parametrize("path", [p for p in PACKAGED if p.stem != "en"],
                         ids=lambda p: p.name)
def test_each_entry_shows_the_translator_the_english(path: Path) -> None:
    """The ``#.`` line over each entry is en.po's words (what a PO editor shows as the
    source): a changed English word shows in every other file's diff."""
    with open(path, "rb") as f:
        catalogue = read_po(f)
    for message in catalogue:
        if message.id and message.id != "language.direction":
            assert message.auto_comments == [words.EN[message.id]], (path.name, message.id)


def test_a_language_is_one_file_on_the_search_path(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    write_catalogue(tmp_path / "locales")
    monkeypatch.setenv(catalogues.ENV, str(tmp_path / "locales"))
    loaded = catalogues.load()
    assert loaded.problems == {}
    qps = loaded.catalogues[CODE]
    assert qps.words == pseudo_words() and not qps.rtl and qps.name == "Pseudo"
    assert list(loaded.catalogues) == ["en", "fa", "fil", "ja", "ms", CODE]


def test_an_operators_file_corrects_a_packaged_language(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "ms.po"
    text = (catalogues.PACKAGED_DIR / "ms.po").read_text()
    own.write_text(text.replace('msgstr "Meja {id}"', 'msgstr "Meja Utama {id}"'))
    monkeypatch.setenv(catalogues.ENV, str(tmp_path))
    loaded = catalogues.load()
    assert loaded.catalogues["ms"].path == own
    assert loaded.catalogues["ms"].words["table"] == "Meja Utama {id}"


def test_a_catalogue_behind_english_is_offered_with_those_words_in_english(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_catalogue(tmp_path, drop=("seat.P", "round"))
    monkeypatch.setenv(catalogues.ENV, str(tmp_path))
    loaded = catalogues.load()
    assert CODE not in loaded.problems
    assert sorted(loaded.behind[CODE]) == ["round", "seat.P"], loaded.behind
    qps = loaded.catalogues[CODE].words
    assert qps["round"] == words.EN["round"] and qps["seat.P"] == words.EN["seat.P"]
    assert qps["table"] == pseudo_words()["table"] != words.EN["table"]  # the rest its own
    assert set(qps) == set(words.EN)


def test_a_key_given_twice_is_refused_naming_the_file_the_key_and_both_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_catalogue(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    first = next(n for n, line in enumerate(lines, 1) if line == 'msgid "round"')
    path.write_text("\n".join([*lines, "", 'msgid "round"', 'msgstr "[Ŕöüñd {n}] 2"', ""]),
                    encoding="utf-8")
    second = len(lines) + 2
    monkeypatch.setenv(catalogues.ENV, str(tmp_path))
    loaded = catalogues.load()
    assert CODE not in loaded.catalogues
    assert f"{path}:{second}: round is given twice (lines {first} and {second})" in \
        " ".join(loaded.problems[CODE]), loaded.problems


@pytest.mark.parametrize("broken, said", [
    ({"change": {"round": "[Ŕöüñd]"}}, "qps.po: round has placeholders [], English ['n']"),
    ({"change": {"language.direction": "sideways"}},
     "qps.po: language.direction must be ltr or rtl"),
    ({"change": {"seat.P": " "}}, "seat.P has no words"),
])
def test_a_broken_catalogue_is_named_and_costs_no_other_language(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: dict, said: str) -> None:
    path = write_catalogue(tmp_path, **broken)
    monkeypatch.setenv(catalogues.ENV, str(tmp_path))
    loaded = catalogues.load()
    assert CODE not in loaded.catalogues
    assert any(said in problem and str(path) in problem for problem in loaded.problems[CODE]), \
        loaded.problems
    assert set(loaded.catalogues) == {"en", "fa", "fil", "ja", "ms"}


def test_a_file_that_is_no_po_file_or_names_another_language_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "xx.po").write_text("a shopping list, not a catalogue\n")
    good = write_catalogue(tmp_path)
    good.rename(tmp_path / "qpt.po")
    fuzzy = write_catalogue(tmp_path / "fuzzy")
    fuzzy.write_text(fuzzy.read_text().replace('msgid "round"', '#, fuzzy\nmsgid "round"'))
    monkeypatch.setenv(catalogues.ENV, os.pathsep.join([str(tmp_path), str(fuzzy.parent)]))
    loaded = catalogues.load()
    assert "xx.po: cannot be read as a PO file" in " ".join(loaded.problems["xx"])
    assert "its header says Language: qps, its name says qpt" in " ".join(loaded.problems["qpt"])
    fuzzy_line = next(n for n, line in enumerate(fuzzy.read_text().splitlines(), 1)
                      if line == 'msgid "round"')
    assert f"qps.po:{fuzzy_line}: round is marked fuzzy" in " ".join(loaded.problems[CODE])


CONFIG_PROBE = """
import json, sys
from controller.service.config.settings import ConfigError, parse_config
from controller.service.control.access import own_group
config = {"table": {"id": "T01"}, "state_dir": sys.argv[1] + "/state",
          "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe"},
          "control": {"socket": sys.argv[1] + "/c.sock", "supervisor_group": own_group()},
          "display": {"listen": "127.0.0.1:0", "language": "qps"}}
try:
    print(json.dumps({"language": parse_config(config, "t").display.language}))
except ConfigError as e:
    print(json.dumps({"error": str(e)}))
"""


def config_language(tmp_path: Path, locales: Path) -> dict[str, str]:
    """``display.language: qps`` read by a fresh process whose catalogues include ``locales``."""
    done = subprocess.run([sys.executable, "-c", CONFIG_PROBE, str(tmp_path)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, catalogues.ENV: str(locales)})
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_config_takes_a_language_with_a_whole_catalogue_and_names_a_broken_one(
        tmp_path: Path) -> None:
    write_catalogue(tmp_path / "good")
    assert config_language(tmp_path, tmp_path / "good") == {"language": CODE}
    broken = write_catalogue(tmp_path / "broken", change={"round": "[Ŕöüñd]"})
    error = config_language(tmp_path, tmp_path / "broken")["error"]
    assert (f"display.language: \"qps\" cannot be used: {broken}: round has placeholders"
            in error)
    error = config_language(tmp_path, tmp_path / "none")["error"]
    assert "no catalogue qps.po (languages: en, fa, fil, ja, ms)" in error


def test_no_packaged_catalogue_names_a_card() -> None:
    """Every catalogue crosses to the pages in the feed's ``state`` message while betting is
    open: no word of a packaged language may spell a card, or the sealing tests could not
    tell the words from a leak. (The pseudo-language is left out: its accented letters are no
    token edge to the sealing search, so "Šté" holds an "St".)"""
    from controller.rules.cards import RANKS, SUITS
    from support.sealing import Leaks

    leaks = Leaks()
    for rank in RANKS:
        for suit in SUITS:
            leaks.add_card(rank + suit)
    for code, catalogue in words.CATALOGUE.items():
        found = leaks.found_in(f"the {code} catalogue", catalogue)
        assert not found, found[:3]
