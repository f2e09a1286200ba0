"""What a local insider with write access to the journal, but not the chain key, can do to it.

Each function edits a real journal file in place with plain SQL, then makes it look whole the
only way such an insider can: every hash from the edit on recomputed as plain SHA-256, the
``head`` row fixed, and the outbox's delivered positions pulled back to the new end.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from controller.durability.journal import canonical_json, record_hash


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None)


def rechain(conn: sqlite3.Connection, from_n: int) -> None:
    """Recompute prev_hash and hash (plain SHA-256) of every record from ``from_n`` on, and
    the head row, as someone without the key can."""
    prev_row = conn.execute("SELECT hash FROM records WHERE n=?", (from_n - 1,)).fetchone()
    prev = prev_row[0] if prev_row else "0" * 64
    rows = conn.execute("SELECT n, kind, event_seq, written, body FROM records WHERE n >= ? "
                        "ORDER BY n", (from_n,)).fetchall()
    for n, kind, seq, written, body in rows:
        digest = record_hash(n, kind, seq, written, prev, body)
        conn.execute("UPDATE records SET prev_hash=?, hash=? WHERE n=?", (prev, digest, n))
        prev = digest
    fix_head(conn)


def fix_head(conn: sqlite3.Connection) -> None:
    n, digest = conn.execute("SELECT n, hash FROM records ORDER BY n DESC LIMIT 1").fetchone()
    conn.execute("UPDATE head SET records=?, last_hash=? WHERE id=1", (n, digest))
    last_seq = conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0]
    conn.execute("UPDATE delivery SET last_seq=? WHERE last_seq > ?", (last_seq, last_seq))


def truncate_tail(path: Path, events: int = 7) -> int:
    """Cut the journal at an entry boundary so that at least ``events`` events go; returns how
    many went. The chain of what is left holds as it is: nothing to recompute."""
    conn = _open(path)
    try:
        inputs = [n for (n,) in conn.execute(
            "SELECT n FROM records WHERE kind='input' ORDER BY n DESC")]
        for n in inputs:
            cut = conn.execute("SELECT COUNT(*) FROM records WHERE kind='event' AND n >= ?",
                               (n,)).fetchone()[0]
            if cut >= events:
                conn.execute("BEGIN")
                conn.execute("DELETE FROM records WHERE n >= ?", (n,))
                fix_head(conn)
                conn.execute("COMMIT")
                return int(cut)
        raise AssertionError("the journal has too few events to cut")
    finally:
        conn.close()


def drop_middle_entry(path: Path) -> int:
    """Remove one input from the middle with the events it produced, renumber the records,
    the events' seqs and ids after it so that nothing looks missing, and re-chain; returns
    the number the input had."""
    conn = _open(path)
    try:
        total = conn.execute("SELECT MAX(n) FROM records").fetchone()[0]
        middle = conn.execute("SELECT MIN(n) FROM records WHERE kind='input' AND n >= ? "
                              "AND n + 1 IN (SELECT n FROM records WHERE kind='event')",
                              (total // 2,)).fetchone()[0]
        after = conn.execute("SELECT MIN(n) FROM records WHERE kind='input' AND n > ?",
                             (middle,)).fetchone()[0]
        gone = after - middle
        events_gone = gone - 1
        conn.execute("BEGIN")
        conn.execute("DELETE FROM records WHERE n >= ? AND n < ?", (middle, after))
        for n, kind, seq, body in conn.execute(
                "SELECT n, kind, event_seq, body FROM records WHERE n >= ? ORDER BY n",
                (after,)).fetchall():
            if kind == "event":
                event = json.loads(body)
                event["seq"] = seq - events_gone
                event["id"] = f"{event['table']}:{event['seq']}"
                conn.execute("UPDATE records SET n=?, event_seq=?, body=? WHERE n=?",
                             (n - gone, seq - events_gone, canonical_json(event), n))
            else:
                conn.execute("UPDATE records SET n=? WHERE n=?", (n - gone, n))
        rechain(conn, middle)
        conn.execute("COMMIT")
        return int(middle)
    finally:
        conn.close()


def swap_two_cards(path: Path) -> tuple[int, int]:
    """Swap the cards of the last round's first two card inputs and re-chain; returns their
    record numbers."""
    conn = _open(path)
    try:
        opened = conn.execute(
            "SELECT MAX(n) FROM records WHERE kind='event' "
            "AND json_extract(body, '$.type')='round_opened'").fetchone()[0]
        first, second = conn.execute(
            "SELECT n, body FROM records WHERE kind='input' AND n > ? "
            "AND json_extract(body, '$.kind')='card' ORDER BY n LIMIT 2", (opened,)).fetchall()
        a, b = json.loads(first[1]), json.loads(second[1])
        assert a["card"] != b["card"]
        a["card"], b["card"] = b["card"], a["card"]
        conn.execute("BEGIN")
        conn.execute("UPDATE records SET body=? WHERE n=?", (canonical_json(a), first[0]))
        conn.execute("UPDATE records SET body=? WHERE n=?", (canonical_json(b), second[0]))
        rechain(conn, first[0])
        conn.execute("COMMIT")
        return int(first[0]), int(second[0])
    finally:
        conn.close()


def make_plain(path: Path) -> None:
    """Downgrade a keyed journal: say it is plain and re-chain every record with SHA-256."""
    conn = _open(path)
    try:
        conn.execute("BEGIN")
        conn.execute("UPDATE meta SET value=? WHERE key='chain'",
                     (json.dumps({"kind": "sha256"}),))
        rechain(conn, 1)
        conn.execute("COMMIT")
    finally:
        conn.close()
