"""The soak's checks: pure functions of what the backends received, what the journal holds,
the cards the harness sent, and the daemon's process samples. Each returns its problems."""

from __future__ import annotations

import json
from typing import Any

from bench.soak.results import FAULT_KINDS, ProcSample
from controller.durability.delivery.anchors import strip_anchor
from controller.rules.cards import parse_card
from controller.rules.hands import HAND_ORDER, evaluate_hand, round_result_data

#: the card sent for (shoe, round, index in the round: 0 = burn, 1..12)
SentCards = dict[tuple[int, int, int], str]


def max_seq(events: list[dict[str, Any]]) -> int:
    return max((int(e["seq"]) for e in events), default=0)


def check_delivery(name: str, received: list[dict[str, Any]],
                   journaled: list[dict[str, Any]]) -> list[str]:
    """Every journaled event reached the backend ``name``: first copies in seq order, none
    missing, each equal to the journal's, repeats equal to the first copy."""
    first: dict[str, dict[str, Any]] = {}
    order: list[int] = []
    problems = []
    for event in received:
        if event["id"] in first:
            if first[event["id"]] != event:
                problems.append(f"{name}: {event['id']} came again with another body")
            continue
        first[event["id"]] = event
        order.append(int(event["seq"]))
    if order != sorted(order):
        bad = next(i for i in range(1, len(order)) if order[i] < order[i - 1])
        problems.append(f"{name}: out of order at seq {order[bad - 1]} then {order[bad]}")
    want = [e["id"] for e in journaled]
    missing = [i for i in want if i not in first]
    if missing:
        problems.append(f"{name}: {len(missing)} events missing, first {missing[0]}")
    # as journaled: without the anchor the outbox adds on the way out
    differing = [e["id"] for e in journaled
                 if e["id"] in first and strip_anchor(first[e["id"]]) != e]
    if differing:
        problems.append(f"{name}: {len(differing)} events differ from the journal, "
                        f"first {differing[0]}")
    return problems[:5]


def check_round(event: dict[str, Any], sent: SentCards) -> list[str]:
    """A ``round_result`` equals the rules' result on the cards the harness sent that round."""
    shoe, rnd = int(event["shoe"]), int(event["round"])
    hands = {}
    for i, position in enumerate(HAND_ORDER):
        codes = [sent.get((shoe, rnd, 1 + i)), sent.get((shoe, rnd, 7 + i))]
        if None in codes:
            return [f"shoe {shoe} round {rnd}: the harness has no record of the cards of "
                    f"{position}"]
        hands[position] = evaluate_hand([parse_card(c) for c in codes])
    expected = round_result_data(hands)
    data = event["data"]
    if expected["hands"] != data["hands"] or expected["positions"] != data["positions"]:
        return [f"shoe {shoe} round {rnd}: round_result disagrees with the rules on the "
                f"cards sent: {json.dumps(data)[:300]} vs {json.dumps(expected)[:300]}"]
    return []


def check_footprint(ref: ProcSample | None, fin: ProcSample | None) -> list[str]:
    """RSS grew less than 10 %, threads and fds did not grow, no restart in between."""
    if ref is None or fin is None:
        return ["no RSS reference sample"]
    problems = []
    if ref.pid != fin.pid:
        problems.append("the daemon restarted inside the RSS window")
    if fin.rss_kb > ref.rss_kb * 1.10:
        problems.append(f"RSS grew {ref.rss_kb} -> {fin.rss_kb} kB (> 10 %)")
    if fin.threads > ref.threads:
        problems.append(f"threads grew {ref.threads} -> {fin.threads}")
    if fin.fds > ref.fds + 1:  # one connection may be mid-reconnect
        grown = sorted(set(fin.fd_targets) - set(ref.fd_targets))
        problems.append(f"fds grew {ref.fds} -> {fin.fds}: new {', '.join(grown)}")
    return problems


def check_fault_kinds(faults: dict[str, int], kills: int) -> list[str]:
    """Every fault kind was thrown at least once (SIGKILL only when kills were asked for)."""
    return [f"fault kind {kind} was never injected" for kind in FAULT_KINDS
            if not (kills == 0 and kind == "sigkill") and not faults.get(kind)]
