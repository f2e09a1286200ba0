"""The exact RTP, computed by the CLI from the project's own rules."""

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from controller.rules.rtp import compute_rtp


@pytest.mark.slow
def test_rtp_json_reproduces_the_rule_sheets():
    out = subprocess.run([sys.executable, "-m", "controller", "rtp", "--json"],
                         capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    assert data["decks"] == 8
    player = Fraction(data["player"]["rtp"])
    assert str(player) == data["player"]["rtp"]  # lowest terms
    assert round(data["player"]["percent"], 2) == 98.75  # the sheets' 98.75%
    assert abs(float(player) * 100 - data["player"]["percent"]) < 1e-9
    pair = Fraction(data["pair"]["rtp"])
    assert str(pair) == data["pair"]["rtp"]
    outcomes = data["player"]["outcomes"]
    assert sum(Fraction(o["p"]) for o in outcomes.values()) == 1
    returns = data["player"]["returns_per_unit"]
    assert set(returns) == {"0", "1", "2", "3", "4"}
    assert sum(int(k) * Fraction(v["p"]) for k, v in returns.items()) == 2 * player


@pytest.mark.slow
def test_pair_bet_rtp_matches_an_independent_count():
    # P(first two cards are the same rank) from an 8-deck shoe, counted directly: 31/415.
    p_pair = Fraction(32 * 31 * 13, 416 * 415)
    assert compute_rtp(8).pair_rtp == 12 * p_pair


@pytest.mark.slow
def test_one_deck_enumeration_matches_brute_force_over_ordered_deals():
    # A brute-force check of the class enumeration on a small shoe: one deck, every deal of
    # four distinct cards, with the same settle().
    from itertools import permutations

    from controller.rules.cards import ALL_CARDS
    from controller.rules.hands import evaluate_hand, settle

    hands = {}
    total = returned = 0
    deck = ALL_CARDS
    for p1, p2 in permutations(deck, 2):
        player = evaluate_hand((p1, p2))
        rest = [c for c in deck if c not in (p1, p2)]
        for b1 in rest:
            for b2 in rest:
                if b1 == b2:
                    continue
                banker = hands.get((b1, b2)) or hands.setdefault((b1, b2), evaluate_hand((b1, b2)))
                returned += settle(player, banker).player_bet_return
                total += 1
    report = compute_rtp(1)
    assert report.deals == total
    assert report.player_rtp == Fraction(returned, 2 * total)


@pytest.mark.slow
def test_rtp_text_output_is_readable():
    out = subprocess.run([sys.executable, "-m", "controller", "rtp"],
                         capture_output=True, text=True, check=True).stdout
    assert "98.7499%" in out and "Player N Pair" in out


def test_rtp_rejects_bad_decks():
    proc = subprocess.run([sys.executable, "-m", "controller", "rtp", "--decks", "zero"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "expected a whole number" in proc.stderr


RECORDED = Path(__file__).with_name("data") / "rtp_by_decks.json"


@pytest.mark.parametrize("decks", range(1, 9))
def test_rtp_figures_are_the_recorded_ones_to_the_digit(decks: int) -> None:
    # Recorded from the first, plain enumeration (one settle per Player and Banker class):
    # a faster enumeration must print the very same text, fractions and floats alike.
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))[str(decks)]
    assert json.dumps(compute_rtp(decks).to_json_data()) == json.dumps(recorded)


@pytest.mark.slow
def test_hand_kinds_settle_like_every_hand_of_their_kind() -> None:
    # The enumeration settles one representative per kind of hand: the fold is sound only
    # while settle() reads nothing a kind leaves out. Checked over every pair of classes.
    from controller.rules.hands import settle
    from controller.rules.rtp import _CLASSES, _hand, _kinds, _settled

    of_class, _ = _kinds()
    table = _settled()
    for p, player in enumerate(_CLASSES):
        for b, banker in enumerate(_CLASSES):
            assert settle(_hand(*player), _hand(*banker)) == table[of_class[p]][of_class[b]]
