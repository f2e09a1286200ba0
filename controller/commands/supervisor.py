"""``pokdeng-table supervisor ACTION``: the supervisor's controls over the control socket.

For what the key switch does not cover: pause, resume, cancel the round (all bets refunded),
end the shoe, enter the card of a misread by hand (audited as entered manually), reveal the
next hand on a button-reveal table whose panel is gone, and drain the table before an upgrade
(``drain [--wait]``: the open round finishes, no new one starts; ``resume`` releases it).
"""

from __future__ import annotations

import argparse
import json
import sys

from controller.service.control.client import (
    ControlClient,
    add_socket_arguments,
    client_command,
    socket_path,
)

ACTIONS = ("pause", "resume", "cancel-round", "end-shoe", "enter-card", "reveal", "drain")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "supervisor", help="pause, resume, cancel the round, end the shoe, enter a misread card, "
                           "reveal the next hand, drain before an upgrade",
        description="Send a supervisor action to the running daemon; it answers once the table "
                    "has handled it. Exit 0 when done, 1 when the table refused (reason shown).")
    add_socket_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the daemon's answer as JSON")
    parser.add_argument(
        "action", choices=ACTIONS, metavar="ACTION",
        help="pause: stop the table where it is; resume: go on after a pause or a drain; "
             "cancel-round: void the open round, every bet refunded; end-shoe: close the shoe "
             "now; enter-card CARD: the card of a misread, entered by hand and audited as such; "
             "reveal: show the next hand on a button-reveal table; drain: finish the open "
             "round and start no new one (before an upgrade)")
    parser.add_argument("card", nargs="?", help="enter-card: the card, e.g. 9D or 9♦")
    parser.add_argument("--wait", action="store_true",
                        help="drain: wait until the open round has finished, then print "
                             "\"drained: safe to stop\"")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="drain --wait: give up after S seconds (exit 1; default 600)")
    parser.set_defaults(func=supervise)


@client_command("supervisor")
def supervise(args: argparse.Namespace) -> int:
    if (args.action == "enter-card") != (args.card is not None):
        print("pokdeng-table supervisor: enter-card needs a CARD, the other actions take none",
              file=sys.stderr)
        return 2
    if args.wait and args.action != "drain":
        print("pokdeng-table supervisor: --wait goes with drain only", file=sys.stderr)
        return 2
    client = ControlClient(socket_path(args))
    answer = client.supervisor(args.action, args.card)
    if args.json:
        print(json.dumps(answer, ensure_ascii=False))
    elif answer.get("ok"):
        print(f"done: {args.action} -> {', '.join(answer.get('events', [])) or 'no events'}")
    else:
        print(f"refused: {answer.get('error', 'no reason given')}", file=sys.stderr)
    if answer.get("ok") and args.wait:
        from controller.commands.drain_wait import wait_drained

        return wait_drained(client, args.timeout)
    return 0 if answer.get("ok") else 1
