"""The journal's chain key: read like the backend secret, from a file or a systemd credential.

``journal.key_file: /path`` or ``journal.key_credential: NAME`` (``$CREDENTIALS_DIRECTORY/NAME``,
``LoadCredential=`` or ``LoadCredentialEncrypted=`` in the unit). The key's bytes are the
HMAC-SHA256 key of the journal's chain, as they are (trailing newline dropped); it is never
logged. A table without either keeps a plain chain (docs/durability.md, Keyed chain).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from controller.durability.as_owner import as_owner_of
from controller.durability.disk import fsync_directory
from controller.transports import TransportConfigError, read_secret

#: a key file beside its journal, by this name, is the journal's key (the demo keeps it there;
#: ``journal verify`` looks for it)
KEY_FILE_BESIDE = "journal.key"

if TYPE_CHECKING:  # `journal verify --key-file` reads a key without the config reader
    from controller.service.config.settings import Config

MIN_KEY_BYTES = 16   # shorter keys can be guessed; `journal new-key` writes 64


def key_option(config: Config) -> str:
    """The config key the journal key was given under, for messages."""
    return "journal.key_credential" if config.journal_key.credential else "journal.key_file"


def load_journal_key(config: Config) -> bytes | None:
    """The configured key, or None for a plain chain; TransportConfigError (naming the option
    and the file, never the key) when it cannot be read, is empty or too short."""
    source = config.journal_key
    if not source.given:
        return None
    option = key_option(config)
    if source.file:  # a key file in a directory another user controls is read as them
        with as_owner_of(Path(source.file).absolute().parent):
            key = read_secret(option, source.file, None)
    else:
        key = read_secret(option, None, source.credential)
    if len(key) < MIN_KEY_BYTES:
        where = source.file or f"credential {source.credential!r}"
        raise TransportConfigError(
            f"{option}: the key in {where} is {len(key)} bytes; use at least {MIN_KEY_BYTES} "
            "random bytes (`pokdeng-table journal new-key FILE` writes one)")
    return key


def read_key_file(path: str | Path) -> bytes:
    """A key file named on the command line (``journal verify --key-file``), or the one beside
    a journal; read as the user who controls its directory (``as_owner.py``)."""
    with as_owner_of(Path(path).absolute().parent):
        key = read_secret("--key-file", str(path), None)
    if len(key) < MIN_KEY_BYTES:
        raise TransportConfigError(f"--key-file: the key in {path} is {len(key)} bytes, "
                                   f"shorter than any journal key ({MIN_KEY_BYTES})")
    return key


def read_key_file_if_any(path: Path) -> bytes | None:
    """The key file at ``path`` (the one beside a journal), None when there is none."""
    with as_owner_of(path.absolute().parent):
        return read_key_file(path) if path.is_file() else None


def make_key_file(path: Path) -> None:
    """Create a new random key file readable by its owner only (the demo's own key);
    an existing one is kept: it keys the journal beside it. Made as the user who controls
    its directory, under a new temporary name (no link there is followed), then renamed."""
    with as_owner_of(path.absolute().parent):
        if path.exists():
            return
        tmp = path.with_name(path.name + ".tmp")  # whole or absent, even if killed mid-write
        tmp.unlink(missing_ok=True)  # a stale one, from a kill mid-write
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        fsync_directory(path.parent)
