"""``pokdeng-table rtp``: the exact return to player, enumerated from the rules."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "rtp",
        help="exact return to player of the Player and Player Pair bets",
        description="Enumerate every deal of a fresh shoe with the table's own rules and print "
        "the exact return to player (Player bet: returned / deducted, stake + held amount).",
    )
    parser.add_argument("--decks", type=_deck_count, default=8,
                        help="decks in the shoe, 1 to 8 like the table's (8)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _deck_count(text: str) -> int:
    from controller.rules.cards import MAX_DECKS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_DECKS:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_DECKS}, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from controller.rules.rtp import compute_rtp

    data = compute_rtp(args.decks).to_json_data()
    if args.json:
        print(json.dumps(data))
        return 0
    print(f"Exact return to player, fresh {data['decks']}-deck shoe "
          f"({data['deals']:,} ordered four-card deals)")
    for name, title in (("player", "Player N (2 units deducted)"), ("pair", "Player N Pair")):
        bet = data[name]
        print(f"\n{title}: RTP {bet['percent']:.4f}%  = {bet['rtp']}")
        for outcome, p in bet["outcomes"].items():
            print(f"  {outcome:<5} {p['percent']:8.4f}%")
        print("  returned per unit:")
        for units, p in bet["returns_per_unit"].items():
            print(f"    {units:>2}  {p['percent']:8.4f}%")
    return 0
