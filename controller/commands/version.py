"""``pokdeng-table version [--verify] [--json]``: which software this is, and whether its
installed files are the ones installed (controller/service/trust/software_identity.py).

Exit 0: printed (and with --verify: every file matches RECORD); 1: files differ from RECORD
or are missing (each named); 2: nothing to verify against (an editable install or a checkout).
"""

from __future__ import annotations

import argparse
import json
import sys

EX_DIFFER = 1
EX_CANNOT_VERIFY = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "version", help="the software version and the digest of its installed files",
        description="Print the version and a SHA-256 digest of the installed files (over the "
                    "installed distribution's RECORD; for an editable install over the .py "
                    "files). --verify re-hashes every installed file against RECORD: exit 1 "
                    "naming the files that differ, 2 when there is no RECORD to check against.")
    parser.add_argument("--verify", action="store_true",
                        help="re-hash the installed files and compare them with RECORD")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=version)


def version(args: argparse.Namespace) -> int:
    from controller.service.trust.software_identity import (
        PACKAGE_FILES,
        current_identity,
        describe,
        verify_installed,
    )

    if not args.verify:
        identity = current_identity()
        if args.json:
            print(json.dumps(describe(identity)))
        else:
            print(f"pokdeng-table {identity.version}\n{identity.digest} "
                  f"({_digest_words(identity.digest_of, identity.where)} {identity.where})")
        return 0
    result = verify_installed()
    identity = result.identity
    if args.json:
        print(json.dumps({**describe(identity), "ok": result.ok, "checked": result.checked,
                          "differing": result.differing, "missing": result.missing,
                          "edited_conffiles": result.edited_conffiles,
                          "unfinished": result.unfinished,
                          "cannot_verify": result.cannot}))
    else:
        print(f"pokdeng-table {identity.version}\n{identity.digest} "
              f"({_digest_words(identity.digest_of, identity.where)} {identity.where})")
        if result.cannot:
            print(f"cannot verify: {result.cannot}", file=sys.stderr)
        elif result.ok:
            print(f"verified: all {result.checked} installed files match RECORD"
                  + (f" and {PACKAGE_FILES}" if identity.where.endswith(PACKAGE_FILES) else ""))
        else:
            bad = len(result.differing) + len(result.missing)
            if bad:
                print(f"NOT VERIFIED: {bad} of {result.checked} installed files differ from "
                      "RECORD:", file=sys.stderr)
            for name in result.differing:
                print(f"  changed: {name}", file=sys.stderr)
            for name in result.missing:
                print(f"  missing: {name}", file=sys.stderr)
            if result.unfinished:
                print(f"NOT VERIFIED: {result.unfinished}", file=sys.stderr)
        for name in result.edited_conffiles:
            print(f"  edited conffile (yours to keep): {name}")
    if result.cannot:
        return EX_CANNOT_VERIFY
    return 0 if result.ok else EX_DIFFER


def _digest_words(digest_of: str, where: str = "") -> str:
    if where.endswith("PACKAGE-FILES"):
        return "over RECORD and every file the Debian package installs, listed in"
    return "over the installed files' RECORD" if digest_of == "record" else \
        "over the .py files of the sources in"
