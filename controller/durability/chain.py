"""How a journal's records are chained: plain SHA-256, or HMAC-SHA256 with the table's key.

Both hash the same material (every column of a record but its own hash, see
``journal.record_hash``). A plain chain proves only that nobody *carelessly* changed the file:
whoever can write it can recompute every hash. A keyed chain can only be recomputed by someone
who holds the key, which lives outside the state directory (a systemd credential, or a file
readable only by the daemon).

The journal records which chain it has in its ``meta`` table (key ``chain``), with a key check
value for a keyed one (an HMAC of a fixed text, so a wrong key is named at once and the key
itself is never stored). A keyed journal never opens without its key, and a plain one never
with a key: nothing is silently downgraded or half keyed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

PLAIN = "sha256"
KEYED = "hmac-sha256"
_KEY_CHECK_TEXT = b"pokdeng-table journal key check v1"

#: what ``status`` and ``journal verify`` say about each kind of chain
DESCRIPTIONS = {
    KEYED: "keyed (HMAC-SHA256)",
    PLAIN: "plain — anyone who can write the file can rewrite it",
}


class ChainKeyProblem(Exception):
    """The key given does not fit the journal's chain; the message says why (never the key)."""


def record_material(n: int, kind: str, event_seq: int | None, written: float, prev_hash: str,
                    body: str) -> bytes:
    """Every column of a record except its own hash, fields separated by \\n."""
    seq_text = "" if event_seq is None else str(event_seq)
    return f"{n}\n{kind}\n{seq_text}\n{written!r}\n{prev_hash}\n{body}".encode()


def key_check(key: bytes) -> str:
    """A value that names the key without revealing it (stored in meta, compared on open)."""
    return hmac.new(key, _KEY_CHECK_TEXT, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class ChainHash:
    """The hash function of one journal's chain: plain when ``key`` is None."""

    key: bytes | None = None

    @property
    def kind(self) -> str:
        return PLAIN if self.key is None else KEYED

    @property
    def keyed(self) -> bool:
        return self.key is not None

    def describe(self) -> str:
        return DESCRIPTIONS[self.kind]

    def digest(self, n: int, kind: str, event_seq: int | None, written: float,
               prev_hash: str, body: str) -> str:
        material = record_material(n, kind, event_seq, written, prev_hash, body)
        if self.key is None:
            return hashlib.sha256(material).hexdigest()
        return hmac.new(self.key, material, hashlib.sha256).hexdigest()

    def mac(self, text: str) -> str | None:
        """An HMAC of ``text`` with the key (None for a plain chain): signs the head file."""
        if self.key is None:
            return None
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def meta_value(self) -> str:
        """The ``meta`` row that records this chain in a new journal."""
        data = {"kind": self.kind}
        if self.key is not None:
            data["key_check"] = key_check(self.key)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def parse_meta(value: str | None) -> tuple[str, str | None]:
    """(kind, key check) from a journal's ``meta`` chain row; a journal written before chains
    were recorded (no row) is plain. Raises ChainKeyProblem when the row is not readable."""
    if value is None:
        return PLAIN, None
    try:
        data = json.loads(value)
        kind = data["kind"]
        check = data.get("key_check")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ChainKeyProblem(f"meta chain is not valid: {value[:200]!r}") from None
    if kind not in DESCRIPTIONS or (kind == KEYED and not isinstance(check, str)):
        raise ChainKeyProblem(f"meta chain is not valid: {value[:200]!r}")
    return kind, check


def chain_for(meta_value: str | None, key: bytes | None) -> ChainHash:
    """The journal's chain given its meta row and the key the caller holds (or None).

    A keyed journal needs its own key; a plain journal refuses a key (it would look keyed
    while every record before the key could be rewritten): ChainKeyProblem says which.
    """
    kind, check = parse_meta(meta_value)
    if kind == KEYED:
        if key is None:
            raise ChainKeyProblem(
                "this journal's chain is keyed (HMAC-SHA256) and no key was given: configure "
                "journal.key_file or journal.key_credential (or pass --key-file)")
        if not hmac.compare_digest(key_check(key), check or ""):
            raise ChainKeyProblem(
                "the key given is not this journal's key (its key check differs): a wrong "
                "key file or credential, or the journal was replaced")
        return ChainHash(key)
    if key is not None:
        raise ChainKeyProblem(
            "this journal has a plain chain (it was started without a key) but a key was "
            "given; a journal keeps the chain it was started with: remove the key from the "
            "config, or start a new state directory (and table id) keyed from its first "
            "record (docs/durability.md, Keyed chain)")
    return ChainHash(None)
