"""What the table does about unexpected inputs: fault codes (the table pauses) and
rejection codes (the input is refused, nothing changes).

One table drives the machine's wording, ``docs/faults.md`` and the tests, so the three
cannot drift apart: ``python -m controller.table.faults`` prints the Markdown of docs/faults.md.

A fault sends a ``paused`` event with ``code`` and ``reason``; a fault while the table is
already paused sends another ``paused`` event (the newest fault is the one shown). A
rejection sends an ``input_rejected`` event with ``code`` and ``reason`` and changes nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    code: str
    when: str
    table_does: str
    way_out: str


# --- faults: the table pauses ----------------------------------------------------------------
SWITCH_PAUSE = "switch_pause"
SUPERVISOR_PAUSE = "supervisor_pause"
CARD_NO_ROUND = "card_no_round"
CARD_WHILE_PAUSED = "card_while_paused"
TOO_MANY_CARDS = "too_many_cards"
NINTH_COPY = "ninth_copy"
SHOE_OVERDRAWN = "shoe_overdrawn"
MISREAD = "misread"
SECOND_CUT_CARD = "second_cut_card"
CUT_CARD_NO_SHOE = "cut_card_no_shoe"
UNKNOWN_SHOE_FRAME = "unknown_shoe_frame"
SHOE_LOST = "shoe_lost"
JOURNAL_UNWRITABLE = "journal_unwritable"
JOURNAL_CHECK_FAILED = "journal_check_failed"
CONTROLLER_FAULT = "controller_fault"

FAULTS: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule(
            SWITCH_PAUSE,
            "The supervisor key switch is turned to PAUSE.",
            "Pauses; the betting countdown freezes with its remaining time.",
            "Key back to RUN (the countdown restarts with the time it had left).",
        ),
        Rule(
            SUPERVISOR_PAUSE,
            "Supervisor `pause` on the control socket.",
            "Pauses; the betting countdown freezes.",
            "Supervisor `resume` (refused while the key is at PAUSE).",
        ),
        Rule(
            CARD_NO_ROUND,
            "A card (or an unreadable card) comes out while no round is open: "
            "between rounds or with no shoe open.",
            "Pauses. The card is out of play (set aside); it counts as drawn from the shoe "
            "when its value is known and a shoe is open.",
            "Set the card aside, then resume. Supervisor `end_shoe` if the shoe is wrong.",
        ),
        Rule(
            CARD_WHILE_PAUSED,
            "A card (or an unreadable card) comes out while the table is paused.",
            "Stays paused with this fault. The card is set aside, not dealt; it counts as "
            "drawn when it is a possible card.",
            "Set the card aside, then resume; or `cancel_round`.",
        ),
        Rule(
            TOO_MANY_CARDS,
            "A 14th card in a round (the burn and all 12 cards are already dealt).",
            "Pauses. The extra card is set aside and counts as drawn.",
            "Set the card aside, then resume; or `cancel_round`.",
        ),
        Rule(
            NINTH_COPY,
            "A card would be copy decks+1 of that card in the shoe (a 9th 7♥ in 8 decks): "
            "a foreign card or a bad read.",
            "Pauses. The read is not accepted and not counted. While betting is open the "
            "reason says \"a card\" (the value is sealed).",
            "Supervisor `enter_card` with the card actually drawn, or set it aside and "
            "resume, or `cancel_round`; `end_shoe` if the shoe is not ours.",
        ),
        Rule(
            SHOE_OVERDRAWN,
            "A card beyond the shoe's size (card 417 of an 8-deck shoe).",
            "Pauses. The read is not accepted and not counted.",
            "`cancel_round`, then supervisor `end_shoe`; or resume after checking the reader.",
        ),
        Rule(
            MISREAD,
            "The shoe reports a card it could not read while the procedure needs a card "
            "(flip card, shoe burn, or a round short of its 13 cards). Carries the driver's "
            "code and reason when it gave them.",
            "Pauses and owes that card: resume is refused until it is entered.",
            "Supervisor `enter_card` with the card (the table resumes and deals it where the "
            "misread card went), or `cancel_round` (or `end_shoe` during the shoe's burns).",
        ),
        Rule(
            SECOND_CUT_CARD,
            "A second cut card in one shoe.",
            "Pauses. The last round was already set by the first cut card.",
            "Resume.",
        ),
        Rule(
            CUT_CARD_NO_SHOE,
            "A cut card while no shoe is open.",
            "Pauses.",
            "Resume.",
        ),
        Rule(
            UNKNOWN_SHOE_FRAME,
            "While a shoe is open, the shoe sends a well-formed frame the driver does not know "
            "(shoe option `unknown_frames: pause`, the default): often the cut card of a "
            "Bee-Tek shoe whose `cut_card_frames` is wrong. With no shoe open it is only "
            "logged.",
            "Pauses; no card is owed. The reason names no frame content; the frame itself is "
            "in the `fault_detail` (after betting closes).",
            "If the frame was the cut card, the round in play or the next is the last: "
            "supervisor `end_shoe` after it, and set `cut_card_frames` (`pokdeng-table "
            "read-shoe --learn-cut`) before the next shoe. Otherwise resume.",
        ),
        Rule(
            SHOE_LOST,
            "The shoe disconnects while the table still needs cards from it (flip card, "
            "shoe burns, a round short of its 13 cards).",
            "Pauses (the countdown freezes). Between rounds a lost shoe only blocks "
            "`start_round` and `new_shoe` (see `shoe_disconnected`).",
            "Reconnect the shoe, then resume; or `cancel_round`.",
        ),
        Rule(
            JOURNAL_UNWRITABLE,
            "The daemon could not write the journal (disk full, I/O error) and reports it with "
            "a `fault` input once it can journal again.",
            "Pauses (the countdown freezes): nothing may happen that is not recorded.",
            "Fix the storage, then supervisor `resume`; or `cancel_round`.",
        ),
        Rule(
            JOURNAL_CHECK_FAILED,
            "The full check of the journal after a start (the records before the checkpoint "
            "the start replayed from) finds a record that does not hold: the journal was "
            "edited or damaged behind the table's back. (A check that cannot even start, the "
            "PC out of processes or file descriptors, is no verdict: `status` says `journal "
            "check: waiting to run`, it is tried every 30 s and the table deals on.)",
            "Pauses; the reason names the record (never a card). Retention archives nothing "
            "and leaves the verified mark where it was until a start whose check passes "
            "(docs/durability.md).",
            "Stop the table and `journal verify` it; restore the state directory from a copy "
            "that verifies (docs/install.md). A supervisor `resume` deals on regardless, "
            "journaled with who took it.",
        ),
        Rule(
            CONTROLLER_FAULT,
            "Any other failure the controller itself reports with a `fault` input; the "
            "input's own code and reason are kept in the event's `detail`.",
            "Pauses.",
            "Supervisor `resume` once the cause is fixed; or `cancel_round`.",
        ),
    )
}

# --- rejections: input_rejected, nothing changes ----------------------------------------------
NOT_ALLOWED = "not_allowed"
TABLE_PAUSED = "table_paused"
SHOE_DISCONNECTED = "shoe_disconnected"
ROUND_OPEN = "round_open"
NOT_PAUSED = "not_paused"
ALREADY_PAUSED = "already_paused"
KEY_AT_PAUSE = "key_at_pause"
RESUME_BLOCKED = "resume_blocked"
NO_CARD_OWED = "no_card_owed"
CARD_NOT_IN_SHOE = "card_not_in_shoe"
DRAINING = "draining"

REJECTIONS: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule(
            NOT_ALLOWED,
            "A button or supervisor action that makes no sense in the state "
            "(`start_round` during a round, `reveal` before betting closed, `new_shoe` with a "
            "shoe open, `reveal` on an automatic-reveal table, …).",
            "`input_rejected` saying why; no state change.",
            "Follow the prompt.",
        ),
        Rule(
            TABLE_PAUSED,
            "A dealer button other than `cancel_round` while the table is paused.",
            "`input_rejected`; no state change.",
            "Resume first.",
        ),
        Rule(
            SHOE_DISCONNECTED,
            "`start_round` or `new_shoe` while the shoe is disconnected.",
            "`input_rejected`; no state change.",
            "Reconnect the shoe (a `device_status` event shows it back).",
        ),
        Rule(
            ROUND_OPEN,
            "Dealer `end_shoe` while a round is open.",
            "`input_rejected`; the round goes on.",
            "`cancel_round` first, or supervisor `end_shoe` (cancels the round and ends the shoe).",
        ),
        Rule(
            NOT_PAUSED,
            "Supervisor `resume` while the table is running.",
            "`input_rejected`.",
            "None needed.",
        ),
        Rule(
            ALREADY_PAUSED,
            "Supervisor `pause` while the table is already paused.",
            "`input_rejected`; the table stays paused with its current fault.",
            "None needed.",
        ),
        Rule(
            KEY_AT_PAUSE,
            "Supervisor `resume` or `enter_card` while the key switch is at PAUSE.",
            "`input_rejected`; stays paused.",
            "Turn the key to RUN (that resumes by itself when nothing else blocks).",
        ),
        Rule(
            RESUME_BLOCKED,
            "Resume (key to RUN or supervisor `resume`) while a misread card is not entered "
            "yet, or while the shoe is still disconnected and cards are needed.",
            "`input_rejected` naming what blocks; stays paused.",
            "Supervisor `enter_card`, reconnect the shoe, or `cancel_round`.",
        ),
        Rule(
            NO_CARD_OWED,
            "Supervisor `enter_card` when no misread card is owed.",
            "`input_rejected` (the entered card is not echoed: it may be sealed).",
            "None needed.",
        ),
        Rule(
            CARD_NOT_IN_SHOE,
            "Supervisor `enter_card` with a card this shoe cannot hold any more: every copy "
            "of it is already drawn, or the shoe is used up.",
            "`input_rejected` (the card is not echoed); stays paused, the card is still owed.",
            "Check the card and enter the one actually drawn, or `cancel_round`.",
        ),
        Rule(
            DRAINING,
            "`start_round` while the table is draining (supervisor `drain`, before an "
            "upgrade): the round that was open has finished, no new one starts.",
            "`input_rejected`: \"draining: safe to stop\"; the dealer's prompt says the same.",
            "Stop the daemon (upgrade), or supervisor `resume` to take rounds again.",
        ),
    )
}


def _table(rules: dict[str, Rule]) -> list[str]:
    lines = ["| code | when | what the table does | the way out |", "|---|---|---|---|"]
    for rule in rules.values():
        cells = (f"`{rule.code}`", rule.when, rule.table_does, rule.way_out)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return lines


def faults_markdown() -> str:
    """The text of docs/faults.md (a test fails when the committed file drifts)."""
    lines = [
        "# Faults and rejections",
        "",
        "<!-- Generated by `python -m controller.table.faults > docs/faults.md` from "
        "controller/table/faults.py; tests/table/test_machine_faults.py fails when this file "
        "drifts. -->",
        "",
        "Every unexpected input is visible: a **fault** pauses the table with a `paused` event "
        "(`code`, plain-words `reason`); a **rejection** refuses a button or supervisor action "
        "with an `input_rejected` event (`code`, `reason`, the input's kind and name) and "
        "changes nothing. A fault while already paused sends another `paused` event; the "
        "newest fault is the one shown in `status()`.",
        "",
        "**Sealed values.** While a round's betting is open, a reason never names a card of "
        "that round: it says \"a card\". Cards outside a round (the flip card, cards with no "
        "round open) and cards after `betting_closed` are named.",
        "",
        "**What the shoe sent.** A fault's `reason` and `detail` never quote a frame, an RFID "
        "tag id or a card the shoe reported: any of them may belong to a round whose betting is "
        "open. The drivers hand that part over separately as *evidence*; it is journaled (the "
        "journal is readable by the daemon's own user only) and published in a `fault_detail` "
        "event (`code`, `paused_seq`: the `paused` event it explains, `evidence`: e.g. `frame`, "
        "`tag`, `card`) — right after the `paused` event when no betting is open, otherwise "
        "right after that round's `betting_closed` or `round_cancelled`. So the supervisor "
        "learns which card it was without anyone learning it before bets close. Driver log "
        "lines at INFO and above name no bytes either (hex dumps at DEBUG only); a table "
        "logging at DEBUG is not sealed, and the daemon says so at start.",
        "",
        "**Pause and resume.** A pause freezes the betting countdown; resume restarts it with "
        "the time it had left (`resumed` carries the new `betting_closes_at`). The key switch "
        "is a level: while it is at PAUSE the table cannot resume. `cancel_round` (dealer key "
        "or supervisor) and supervisor `end_shoe` work while paused; they clear the fault and "
        "the table resumes by itself when the key is at RUN. Repeated reports of the same "
        "switch or device level are not news and send nothing.",
        "",
        "## Faults (the table pauses)",
        "",
        *_table(FAULTS),
        "",
        "## Rejections (`input_rejected`, no state change)",
        "",
        *_table(REJECTIONS),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(faults_markdown())
