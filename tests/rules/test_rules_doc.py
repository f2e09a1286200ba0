"""docs/rules.md against the rules engine: its worked examples and RTP figures are checked,
so the page cannot drift from the code."""

import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from controller.rules.hands import COMBO_TENTHS, evaluate_hand, settle
from controller.rules.rtp import compute_rtp

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"

# What the rule sheets return on a stake of 100 for the bet each example is about; the doc's
# first row of every example must keep saying so.
SHEET_RETURNS = {1: 300, 2: 100, 3: 400, 4: 0, 5: 200, 6: 0, 7: 1200, 8: 300, 9: 400}
SHEET_BETS = {n: "Player 1 Pair" if n == 7 else "Player 1" for n in SHEET_RETURNS}

COMBO_NAMES = {
    "AK Flush": "ak_flush",
    "Special Pair": "special_pair",
    "Face-card Combo": "face_card_combo",
    "Single Face-card with No Point": "single_face_card_no_point",
    "Flush with No Point": "flush_no_point",
}


def _tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table in ``text``, as rows keyed by the header cells."""
    tables, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        underline = i + 1 < len(lines) and re.match(r"^\|[-| ]+\|$", lines[i + 1])
        if lines[i].startswith("|") and underline:
            header = _cells(lines[i])
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(dict(zip(header, _cells(lines[i]))))
                i += 1
            tables.append(rows)
        else:
            i += 1
    return tables


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/rules.md has no section {title!r}"
    return match.group(1)


def _examples() -> dict[int, tuple[list[dict[str, str]], list[dict[str, str]]]]:
    section = _section(DOC.read_text(encoding="utf-8"), "11. The nine worked examples")
    parts = re.split(r"^### Example (\d+)\n", section, flags=re.M)
    examples = {}
    for number, body in zip(parts[1::2], parts[2::2]):
        tables = _tables(body)
        assert len(tables) == 2, f"example {number}: expected a hands table and a bets table"
        examples[int(number)] = (tables[0], tables[1])
    return examples


EXAMPLES = _examples()


def test_the_doc_has_the_nine_examples_of_the_sheets():
    assert sorted(EXAMPLES) == list(range(1, 10))
    for number, (_, bets) in EXAMPLES.items():
        first = bets[0]
        assert (first["bet"], int(first["returned"])) == (SHEET_BETS[number], SHEET_RETURNS[number])


def _pattern(hand) -> set[str]:
    words = {name for name, code in COMBO_NAMES.items() if code == hand.combo}
    return words | {word for word, on in (("flush", hand.flush), ("pair", hand.pair)) if on}


@pytest.mark.parametrize("number", sorted(EXAMPLES))
def test_worked_example_matches_the_rules_engine(number):
    hands_table, bets_table = EXAMPLES[number]
    hands = {}
    for row in hands_table:
        hand = evaluate_hand(row["cards"].split())  # the doc's spellings are accepted codes
        hands[row["hand"]] = hand
        assert Decimal(row["value"]) == Decimal(str(hand.value)), (number, row)
        pattern = row["pattern"]
        written = set() if pattern == "none" else {p.strip() for p in pattern.split(",")}
        assert written == _pattern(hand), (number, row)
    assert set(hands) == {"Banker", "Player 1"}
    result = settle(hands["Player 1"], hands["Banker"])
    for row in bets_table:
        stake, returned = int(row["stake"]), int(row["returned"])
        if row["bet"] == "Player 1":
            assert int(row["deducted"]) == 2 * stake
            odds = None if row["odds"] == "push" else row["odds"]
            assert (row["outcome"], odds) == (result.outcome, result.odds), (number, row)
            assert returned == result.player_bet_return * stake, (number, row)
        elif row["bet"] == "Player 1 Pair":
            assert int(row["deducted"]) == stake
            won = result.pair_bet_return > 0
            assert (row["outcome"], row["odds"]) == (("win", "11:1") if won else ("lose", "1:1"))
            assert returned == result.pair_bet_return * stake, (number, row)
        else:
            pytest.fail(f"example {number}: unknown bet {row['bet']!r}")


def test_rtp_figures_in_the_doc_are_the_tables():
    section = _section(DOC.read_text(encoding="utf-8"), "10. Return to player")
    rtp_table, returns_table = _tables(section)
    report = compute_rtp(8)
    computed = {"Player N": report.player_rtp, "Player N Pair": report.pair_rtp}
    assert {row["bet"] for row in rtp_table} == set(computed)
    for row in rtp_table:
        exact = Fraction(row["RTP, exact"])
        assert exact == computed[row["bet"]], row
        assert row["RTP, percent"] == f"{float(exact) * 100:.4f}%", row
    weight = report.player.weight
    units_of = {int(row["`player_bet_return`"].strip("`")): row for row in returns_table}
    assert set(units_of) == set(report.player.by_return)
    for units, row in units_of.items():
        exact = Fraction(row["probability, exact"])
        assert exact == Fraction(report.player.by_return[units], weight), row
        assert row["percent"] == f"{float(exact) * 100:.4f}%", row


def test_combination_names_in_the_doc_are_the_engines():
    section = _section(DOC.read_text(encoding="utf-8"), "5. What a hand is worth")
    table = next(t for t in _tables(section) if t and "`combo`" in t[0])
    assert {row["name"]: row["`combo`"].strip("`") for row in table} == COMBO_NAMES
    tenths = {row["`combo`"].strip("`"): int(Decimal(row["value"]) * 10) for row in table}
    assert tenths == COMBO_TENTHS
