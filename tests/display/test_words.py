"""The screens' words: every language has every word (a missing one is this failure, never
an English word on a Japanese screen), the same placeholders, the game's terms as the rule
sheets and docs/rules.md write them, one next step for the pages and ``watch``, and the
table's language in its config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from controller.display import words
from controller.display.screen import Screen
from controller.service.config.settings import ConfigError, parse_config
from controller.service.control.access import own_group
from controller.table.faults import FAULTS

RULES = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


@pytest.mark.parametrize("lang", words.LANGUAGES)
def test_every_language_has_every_word_with_the_same_placeholders(lang: str) -> None:
    catalogue = words.CATALOGUE[lang]
    assert set(catalogue) == set(words.EN), (
        f"{lang} lacks {sorted(set(words.EN) - set(catalogue))}, "
        f"has extra {sorted(set(catalogue) - set(words.EN))}")
    for key, text in catalogue.items():
        assert text.strip(), f"{lang}:{key} is empty"
        assert words.placeholders(text) == words.placeholders(words.EN[key]), f"{lang}:{key}"


@pytest.mark.parametrize("lang", [lang for lang in words.LANGUAGES if lang != "en"])
def test_a_translation_is_not_the_english_left_in_place(lang: str) -> None:
    """Words that are the same in English are only the game's loanwords the sheets keep
    (Banker, AK Flush, Flush, …) and codes (RUN, ok): each is listed here on purpose."""
    same_on_purpose = {"seat.banker", "seat.short.P", "seat.short.banker", "combo.ak_flush",
                       "flush", "odds", "odds.short", "health.run", "health.pause", "health.ok",
                       "clock.seconds", "link.live", "seat.burn", "combo.face_card_combo",
                       "seat.flip", "roadmap", "round", "shoe", "watch.shoe", "watch.round",
                       "by.supervisor", "state.connecting", "language.direction",
                       "winner.pok", "result.latest"}
    left = [key for key, text in words.CATALOGUE[lang].items()
            if text == words.EN[key] and key not in same_on_purpose and key != "language"]
    assert not left, f"{lang} says these in English: {left}"


def test_the_combinations_carry_their_names_from_the_rules() -> None:
    """docs/rules.md §5: value, name, combo code. "three faces" is no name of this game."""
    table = re.findall(r"^\| 7\.\d \| ([^|]+) \|[^|]+\| `(\w+)` \|$", RULES.read_text(), re.M)
    assert len(table) == 5
    for name, code in table:
        assert words.say("en", f"combo.{code}") == name.strip()
    assert all("three" not in text for text in words.EN.values())


SHEET_TERMS = {  # as the sheets write them (the Filipino sheet keeps the English names of
    # AK Flush and Face-card Combo in its table; the Persian sheet writes "فلاش AK")
    "fil": {"seat.P": "Manlalaro", "outcome.win": "PANALO", "outcome.lose": "TALO",
            "outcome.tie": "TABLA", "pair": "Pares", "combo.special_pair": "Espesyal na Pares",
            "combo.flush_no_point": "Flush na Walang Puntos"},
    "ms": {"seat.P": "Pemain", "outcome.win": "MENANG", "outcome.lose": "KALAH",
           "outcome.tie": "SERI", "pair": "Pasangan", "combo.special_pair": "Pasangan Khas",
           "combo.face_card_combo": "Kombo Kad Muka",
           "combo.single_face_card_no_point": "Kad Muka Tunggal tanpa Mata",
           "combo.flush_no_point": "Flush tanpa Mata"},
    "fa": {"seat.P": "بازیکن", "seat.banker": "بانکدار", "outcome.win": "برد",
           "outcome.lose": "باخت", "outcome.tie": "مساوی", "pair": "جفت",
           "combo.ak_flush": "فلاش AK", "combo.face_card_combo": "ترکیب کارت صورت",
           "combo.single_face_card_no_point": "تک کارت صورت بدون امتیاز",
           "combo.flush_no_point": "فلاش بدون امتیاز", "odds": "به"},
    "ja": {"seat.P": "プレイヤー", "seat.banker": "バンカー", "outcome.win": "勝ち",
           "outcome.lose": "負け", "outcome.tie": "引き分け", "pair": "ペア",
           "combo.ak_flush": "AK フラッシュ", "combo.special_pair": "スペシャルペア",
           "combo.face_card_combo": "絵柄カードコンボ",
           "combo.single_face_card_no_point": "0 点絵柄カードシングル",
           "combo.flush_no_point": "0 点フラッシュ"},
}


#: the sheets' own words for the roadmap key, a pause, a cancelled round and its refund
SHEET_WORDS = {
    "fil": {"legend.flush": "panlabas na bilog", "legend.pair": "dilaw na tuldok",
            "notice.cancelled": "ibabalik", "notice.paused": "pansamantalang"},
    "ms": {"legend.flush": "bulatan luar", "legend.pair": "titik kuning",
           "state.paused": "DIGANTUNG", "notice.cancelled": "dikembalikan",
           "notice.paused": "digantung"},
    "fa": {"legend.flush": "دایره بیرونی", "legend.pair": "نقطه زرد",
           "legend.win": "بازیکن برنده است", "legend.lose": "بازیکن بازنده است",
           "clock.frozen": "شمارش معکوس", "notice.cancelled": "بازپرداخت"},
    "ja": {"legend.flush": "アウターサークル", "legend.pair": "イエロードット",
           "legend.tie": "タイ", "notice.cancelled": "返金", "way.misread": "キャンセル"},
}
#: wordings the sheets do not use (a literal copy of the English, another word for cancel)
NOT_THE_SHEETS = {"fil": ["ng ang"], "ms": ["jeda"], "fa": ["پایان شرط‌بندی تا"],
                  "ja": ["取り消", "停止した人", "異常"]}


@pytest.mark.parametrize("lang", sorted(SHEET_WORDS))
def test_the_screens_say_it_as_the_sheets_do(lang: str) -> None:
    for key, term in SHEET_WORDS[lang].items():
        assert term.lower() in words.CATALOGUE[lang][key].lower(), f"{lang}:{key}"
    by = [words.say(lang, "banner.by", who=words.words_of(lang, {"key": key, "args": {
        "user": "ana"}})) for key in ("by.supervisor", "by.a_supervisor", "by.key", "by.storage",
                                      "by.fault")]
    for text in [*words.CATALOGUE[lang].values(), *by]:
        for wrong in NOT_THE_SHEETS[lang]:
            assert wrong not in text.lower(), (lang, wrong, text)


@pytest.mark.parametrize("lang", sorted(SHEET_TERMS))
def test_the_game_terms_are_the_sheets(lang: str) -> None:
    for key, term in SHEET_TERMS[lang].items():
        assert term.lower() in words.CATALOGUE[lang][key].lower(), f"{lang}:{key}"


def test_every_fault_the_table_knows_has_plain_words_and_a_way_out() -> None:
    assert set(FAULTS) <= set(words.FAULT_CODES)
    for code in words.FAULT_CODES:
        assert f"fault.{code}" in words.EN and f"way.{code}" in words.EN
    view = Screen().view({"state": "betting", "paused": True, "betting_open": True,
                          "fault": {"code": "supervisor_pause", "reason": "paused"},
                          "last_actions": [{"action": "pause", "outcome": "done",
                                            "by": {"user": "ana"}}]})
    assert view["title"] == "PAUSED"
    banner = view["banner"]
    assert banner["fault"] == "supervisor_pause" and banner["by"] == "a supervisor"
    assert banner["what"] == "A supervisor paused the table."
    assert banner["by_words"] == {"key": "by.a_supervisor", "args": {}}
    assert view["step_words"] == {"key": "step.paused", "args": {}}


@pytest.mark.parametrize("status, english", [
    ({"state": "betting", "betting_open": True, "next_target": "burn", "cards_dealt": 0},
     "burn 1 card"),
    ({"state": "betting", "betting_open": True, "next_target": "P2", "cards_dealt": 8},
     "deal card 8 of 12: Player 2, second card"),
    ({"state": "dealing", "next_target": "banker", "cards_dealt": 6},
     "deal card 6 of 12: Banker, first card"),
    ({"state": "ready", "last_round": True, "devices": {"shoe": True}},
     "press START ROUND (last round of this shoe)"),
    ({"state": "burning", "burn_remaining": 4}, "burn 4 more"),
    ({"state": "revealing", "hands": {"P1": {}, "P2": {}}}, "press REVEAL for Player 3"),
    ({"state": "ready", "drained": True}, "draining: safe to stop"),
])
def test_one_next_step_for_the_pages_and_watch(status: dict[str, Any], english: str) -> None:
    from controller.commands.watch import next_step as watch_step

    view = Screen().view(status)
    assert view["step"] == english == watch_step(status)
    for lang in words.LANGUAGES:  # and in every language, from the same key
        said = words.words_of(lang, view["step_words"])
        assert said == watch_step(status, lang) and "{" not in said


def test_watch_offers_every_language() -> None:
    from controller.commands.cli import build_parser

    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["watch", "--lang", "xx"])
    for lang in words.LANGUAGES:
        assert parser.parse_args(["watch", "--lang", lang]).lang == lang


def test_the_table_language_is_validated_in_the_config(tmp_path: Path) -> None:
    def config(display: dict[str, Any]) -> dict[str, Any]:
        return {"table": {"id": "T01"}, "state_dir": str(tmp_path / "state"),
                "shoe": {"driver": "beetek", "url": "/dev/pokdeng/shoe"},
                "control": {"socket": str(tmp_path / "c.sock"), "supervisor_group": own_group()},
                "display": display}
    assert parse_config(config({"listen": "127.0.0.1:0"}), "t").display.language == "en"
    settings = parse_config(config({"listen": "127.0.0.1:0", "language": "fa"}), "t").display
    assert settings is not None and settings.language == "fa"
    with pytest.raises(ConfigError) as failed:
        parse_config(config({"listen": "127.0.0.1:0", "language": "th"}), "t")
    assert "display.language" in str(failed.value)
    assert "no catalogue th.po (languages: en, fa, fil, ja, ms)" in str(failed.value)
