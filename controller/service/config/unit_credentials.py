"""The credentials the installed unit hands the daemon, read from its unit file and drop-ins.

``config check`` runs outside the unit, so on its own it cannot know what systemd will load:
a drop-in whose empty ``LoadCredential=`` dropped the journal key (the daemon then exits 78),
or a ``LoadCredential=`` line whose file is missing (systemd then refuses to start the unit,
243/CREDENTIALS, without naming the file). Here the unit is read as systemd reads it: the
unit file found first on the unit path, then its drop-ins (``NAME.d/``, the template's
``NAME@.service.d/``, the dash prefixes' and ``service.d/``, by file name, a drop-in in a
directory earlier on the path hiding one of the same name later), an empty value resetting
the list. Which unit runs a config follows from the file's name, as the package's units say:
``/etc/pokdeng-table/table.yaml`` is ``pokdeng-table.service``, ``/etc/pokdeng-table/T01.yaml``
``pokdeng-table@T01.service``.

``SetCredential=`` (and ``SetCredentialEncrypted=``) give a credential inline; for an id that a
``LoadCredential=`` line names too, the inline value is what systemd hands over when the file
cannot be loaded (systemd.exec(5)), so a missing file is then no failure.

Only file names and paths are read and reported here, never a credential's content (an inline
value is kept only to put it where the daemon would find it, and never shown).
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_DIR = "/etc/pokdeng-table"
SINGLE_CONFIG = "table.yaml"
#: systemd's unit path for system units, first wins (systemd.unit(5), "Unit File Load Path")
UNIT_PATH = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
             "/lib/systemd/system", "/usr/lib/systemd/system")
#: where LoadCredential= looks for an id given without an absolute path (systemd.exec(5))
CREDSTORE = ("/etc/credstore", "/run/credstore", "/usr/local/lib/credstore",
             "/usr/lib/credstore")
_LOADING = {"LoadCredential": False, "LoadCredentialEncrypted": True}
_SETTING = ("SetCredential", "SetCredentialEncrypted")


@dataclass(frozen=True)
class Credential:
    """One credential the unit hands over: its id, where it comes from, which line says so."""
    name: str
    source: str | None  # the file it is loaded from; None when the unit sets it inline
    encrypted: bool
    where: str          # "FILE:LINE"
    #: SetCredential='s value as written (escapes not yet undone); never shown
    inline: str | None = field(default=None, repr=False)
    #: for a loaded one, the SetCredential= of the same id: what systemd hands over instead
    #: when the file cannot be loaded
    fallback: Credential | None = field(default=None, repr=False)


@dataclass(frozen=True)
class UnitCredentials:
    unit: str
    files: list[str]           # the unit file and its drop-ins, in the order systemd reads them
    credentials: dict[str, Credential]
    masked: bool = False


def unit_for_config(config_path: str, root: str = "/") -> str | None:
    """The package's unit that runs the config at ``config_path`` (a path inside ``root``), or
    None for a config elsewhere (no unit of ours reads it)."""
    path = Path(os.path.abspath(config_path))
    inside = Path("/") / path.relative_to(os.path.abspath(root)) \
        if path.is_relative_to(os.path.abspath(root)) else path
    if str(inside.parent) != CONFIG_DIR or inside.suffix != ".yaml":
        return None
    if inside.name == SINGLE_CONFIG:
        return "pokdeng-table.service"
    return f"pokdeng-table@{_escape(inside.stem)}.service"


def read_unit(unit: str, root: str = "/") -> UnitCredentials | None:
    """The credentials ``unit`` loads, as its installed files under ``root`` say; None when no
    such unit is installed."""
    name, instance = unit, None
    match = re.fullmatch(r"(.+@)(.*)(\.service)", unit)
    template = f"{match.group(1)}{match.group(3)}" if match else None
    if match:
        instance = match.group(2)
    main = _first_on_path(root, [unit] + ([template] if template else []))
    if main is None:
        return None
    if _masked(main):
        return UnitCredentials(unit, [str(main)], {}, masked=True)
    files = [main] + _dropins(root, name, template)
    # systemd keeps two lists: the loaded (LoadCredential[Encrypted]=) and the set ones
    # (SetCredential[Encrypted]=); an empty value resets its own list, a later line of an id
    # replaces the earlier one
    loaded: dict[str, Credential] = {}
    inline: dict[str, Credential] = {}
    for path in files:
        for line_no, key, value in _service_settings(path):
            where = f"{_shown(path, root)}:{line_no}"
            value = _expand(value, unit, instance)
            if key in _LOADING:
                if not value:
                    loaded.clear()
                    continue
                cred_id, _, source = value.partition(":")
                loaded[cred_id] = Credential(cred_id, source or cred_id, _LOADING[key], where)
            elif key in _SETTING:
                if not value:
                    inline.clear()
                    continue
                cred_id, _, data = value.partition(":")
                inline[cred_id] = Credential(cred_id, None, key.endswith("Encrypted"), where,
                                             inline=data)
    credentials = {cred_id: Credential(c.name, c.source, c.encrypted, c.where,
                                       fallback=inline.get(cred_id))
                   for cred_id, c in loaded.items()}
    for cred_id, c in inline.items():
        credentials.setdefault(cred_id, c)
    return UnitCredentials(unit, [_shown(path, root) for path in files], credentials)


def service_settings(unit: str, root: str = "/") -> list[tuple[str, str, str]] | None:
    """Every ``(FILE:LINE, key, value)`` of the [Service] sections of ``unit``'s file and its
    drop-ins, in the order systemd reads them, specifiers expanded; None when no such unit is
    installed or it is masked."""
    match = re.fullmatch(r"(.+@)(.*)(\.service)", unit)
    template = f"{match.group(1)}{match.group(3)}" if match else None
    instance = match.group(2) if match else None
    main = _first_on_path(root, [unit] + ([template] if template else []))
    if main is None or _masked(main):
        return None
    return [(f"{_shown(path, root)}:{line_no}", key, _expand(value, unit, instance))
            for path in [main] + _dropins(root, unit, template)
            for line_no, key, value in _service_settings(path)]


def source_problem(credential: Credential, root: str = "/") -> str | None:
    """Why systemd could not load ``credential`` from its file (it would refuse to start the
    unit, 243/CREDENTIALS), or None."""
    if credential.source is None or credential.fallback is not None:
        return None  # set inline, or with an inline value systemd falls back on
    path = located(credential, root)
    if path is None:
        return (f"{credential.where}: credential {credential.name!r}: "
                f"{credential.source} is not an absolute path and is in none of "
                f"{', '.join(CREDSTORE)}: the unit would fail to start (243/CREDENTIALS)")
    shown = _shown(path, root)
    if not path.exists():
        return (f"{credential.where}: credential {credential.name!r}: {shown} does not exist: "
                "the unit would fail to start (243/CREDENTIALS); create it (docs/install.md "
                "§5) or drop the line in a drop-in")
    if not os.access(path, os.R_OK):
        return (f"{credential.where}: credential {credential.name!r}: {shown} is not readable "
                f"by {'root' if os.geteuid() == 0 else 'this user: run config check as root'}")
    if path.is_dir() and not credential.encrypted:
        return None  # a directory loads each file in it as a credential of its own
    if not path.is_file() and not path.is_socket():
        return f"{credential.where}: credential {credential.name!r}: {shown} is not a file"
    return None


def located(credential: Credential, root: str = "/") -> Path | None:
    """The file a LoadCredential= line reads, inside ``root``; None when a bare id is in no
    credential store (SetCredential= ones have no file: None too)."""
    if credential.source is None:
        return None
    if credential.source.startswith("/"):
        return _inside(root, credential.source)
    stores = [f"{store}.encrypted" for store in CREDSTORE] if credential.encrypted else []
    for store in stores + list(CREDSTORE):
        candidate = _inside(root, f"{store}/{credential.source}")
        if candidate.exists():
            return candidate
    return None


# -- reading unit files ---------------------------------------------------------------------------
def _inside(root: str, path: str) -> Path:
    return Path(root) / path.lstrip("/")


def _shown(path: Path, root: str) -> str:
    """A path as the system names it (without ``root``)."""
    if os.path.abspath(root) == "/":
        return str(path)
    return "/" + str(path.relative_to(root))


def _first_on_path(root: str, names: list[str]) -> Path | None:
    for name in names:
        for directory in UNIT_PATH:
            candidate = _inside(root, f"{directory}/{name}")
            if candidate.exists() or candidate.is_symlink():
                return candidate
    return None


def _masked(path: Path) -> bool:
    return path.is_symlink() and os.readlink(path) == "/dev/null" or \
        path.exists() and path.stat().st_size == 0


def _dropins(root: str, unit: str, template: str | None) -> list[Path]:
    """Drop-in files in the order systemd applies them: by file name; of two with the same name,
    the one in the directory earlier on the unit path."""
    stem = unit.rsplit(".", 1)[0]
    names = ["service.d"]
    parts = stem.split("-")
    names += [f"{'-'.join(parts[:i])}-.service.d" for i in range(1, len(parts))]
    names += [f"{template}.d"] if template else []
    names.append(f"{unit}.d")
    chosen: dict[str, Path] = {}
    for directory in UNIT_PATH:
        for name in names:
            folder = _inside(root, f"{directory}/{name}")
            if folder.is_dir():
                for path in folder.glob("*.conf"):
                    chosen.setdefault(path.name, path)
    return [chosen[name] for name in sorted(chosen)]


def _service_settings(path: Path) -> list[tuple[int, str, str]]:
    """``(line, key, value)`` of the [Service] section, continuation lines joined."""
    if _masked(path):
        return []
    found, section, pending, start = [], None, "", 0
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line[0] in "#;"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service" and "=" in line:
            key, _, value = line.partition("=")
            found.append((start, key.strip(), value.strip()))
    return found


def _expand(value: str, unit: str, instance: str | None) -> str:
    """The specifiers a credential line may use (%i, %I, %n, %N, %p, %%)."""
    prefix = unit.split("@")[0] if "@" in unit else unit.rsplit(".", 1)[0]
    table = {"i": instance or "", "I": _unescape(instance or ""), "n": unit,
             "N": unit.rsplit(".", 1)[0], "p": prefix, "%": "%"}
    return re.sub(r"%(.)", lambda m: table.get(m.group(1), m.group(0)), value)


def _escape(name: str) -> str:
    """systemd-escape of an instance name, for the characters a table id may hold."""
    return "".join(c if c.isalnum() or c in ":_." else f"\\x{ord(c):02x}" for c in name)


def _unescape(name: str) -> str:
    return re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), name).replace(
        "-", "/")


# -- what config check makes of it ----------------------------------------------------------------
def unit_problems(unit: UnitCredentials, named: dict[str, list[str]],
                  root: str = "/", files: bool = True) -> dict[str, str]:
    """Credential id -> what is wrong: every credential the unit cannot load (named by its
    line; only with ``files``: systemd reads them as root, and so must the check), and every
    credential the config reads that the unit does not hand over (named by the config's
    key)."""
    if unit.masked:
        return {"": f"{unit.unit} is masked ({unit.files[0]}): it cannot start"}
    problems = {credential.name: problem for credential in unit.credentials.values()
                if files and (problem := source_problem(credential, root)) is not None}
    loaded = ", ".join(sorted(unit.credentials)) or "none"
    for name, keys in sorted(named.items()):
        credential = unit.credentials.get(name)
        if credential is None:
            problems[name] = (
                f"{keys[0]}: credential {name!r} is not handed over by {unit.unit} (it loads: "
                f"{loaded}; read from {', '.join(unit.files)}): the daemon would exit 78; add "
                f"LoadCredential={name}:/etc/pokdeng-table/credentials/{name} in a drop-in "
                "(docs/install.md §5)")
            continue
        path = located(credential, root) if files and not credential.encrypted else None
        if path is not None and path.is_dir():
            problems[name] = (
                f"{keys[0]}: credential {name!r}: {_shown(path, root)} ({credential.where}) is "
                f"a directory: systemd hands over each file in it as {name}_FILENAME and no "
                f"credential {name!r}: the daemon would exit 78; name the file itself in "
                "LoadCredential=")
    return problems


def unit_warnings(unit: UnitCredentials, named: dict[str, list[str]],
                  root: str = "/") -> list[str]:
    """What lets another user read a secret the config takes from the unit: a credential file
    readable by others, or a secret given by a plain SetCredential= line (systemd.exec(5):
    any local user reads it over D-Bus, e.g. `systemctl show`)."""
    warnings = []
    for name in sorted(named):
        credential = unit.credentials.get(name)
        if credential is None:
            continue
        inline = credential if credential.source is None else credential.fallback
        if inline is not None and not inline.encrypted:
            warnings.append(
                f"{inline.where}: credential {name!r} is given by SetCredential=: every local "
                "user can read it (systemctl show); keep it in a file of mode 0600 "
                "(LoadCredential=) or encrypt it (SetCredentialEncrypted=, systemd-creds -p)")
        path = located(credential, root)
        if path is not None and path.is_file():
            warning = readable_by_others(path, f"{credential.where}: credential {name!r}",
                                         _shown(path, root))
            if warning:
                warnings.append(warning)
    return warnings


def readable_by_others(path: Path, what: str, shown: str) -> str | None:
    """A warning when the secret file ``path`` is readable by every user, else None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # a file that cannot be read is a problem named elsewhere
    if not mode & stat.S_IROTH:
        return None
    return (f"{what}: {shown} is readable by every user (mode {stat.S_IMODE(mode):04o}): "
            f"chmod 600 {shown}")


class CredentialsView:
    """A private directory holding the unit's credentials as the daemon would find them in
    $CREDENTIALS_DIRECTORY: links to the files, encrypted ones decrypted (``systemd-creds``)
    and inline ones (SetCredential=) written into it. Removed on exit; only root reads it."""

    def __init__(self, unit: UnitCredentials, root: str = "/"):
        self.unit = unit
        self.root = root
        self.notes: list[str] = []     # what could not be checked, and why
        self.problems: list[str] = []  # what systemd would fail on too
        self.path: str | None = None
        #: each file of the view -> what the operator knows it as (their file, their line)
        self.origins: dict[str, str] = {}
        self.unchecked: set[str] = set()  # credentials whose content cannot be read here

    def __enter__(self) -> CredentialsView:
        import tempfile

        base = "/run" if os.access("/run", os.W_OK) else None
        self.path = tempfile.mkdtemp(prefix="pokdeng-credentials-", dir=base)
        for credential in self.unit.credentials.values():
            target = os.path.join(self.path, credential.name)
            source = located(credential, self.root)
            if source is not None and source.is_file():
                self.origins[target] = _shown(source, self.root)
                self._place_file(credential, source, target)
                continue
            inline = credential if credential.source is None else credential.fallback
            if inline is not None and inline.inline is not None:
                self.origins[target] = f"the value of SetCredential={credential.name} " \
                                       f"({inline.where})"
                self._place_inline(inline, inline.inline, target)
            # else no file: source_problem or unit_problems names it
        return self

    def named_as_the_operator_knows_it(self, problem: str) -> str:
        """``problem`` with each path into the view replaced by the file or line it came from."""
        for target, origin in self.origins.items():
            problem = problem.replace(target, origin)
        return problem

    def _place_file(self, credential: Credential, source: Path, target: str) -> None:
        if not credential.encrypted:
            os.symlink(source, target)
            return
        with open(source, "rb") as encrypted:
            self._decrypt(credential, encrypted.read(), target, str(source))

    def _place_inline(self, credential: Credential, value: str, target: str) -> None:
        if credential.encrypted:
            self._decrypt(credential, value.encode(), target, credential.where)
            return
        # systemd undoes C-style escapes (\n, \x00) in SetCredential='s value
        data = codecs.escape_decode(value.encode())[0]
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(data)

    def _decrypt(self, credential: Credential, data: bytes, target: str, shown: str) -> None:
        import subprocess

        if os.path.abspath(self.root) != "/":
            self.notes.append(f"{credential.name}: encrypted for the system it runs on: "
                              "its content is not checked from outside it")
            self.unchecked.add(credential.name)
            return
        result = subprocess.run(["systemd-creds", "decrypt", f"--name={credential.name}", "-",
                                 target], input=data, capture_output=True)
        if result.returncode != 0:
            Path(target).unlink(missing_ok=True)
            why = result.stderr.decode(errors="replace").strip() or result.returncode
            self.problems.append(f"{credential.where}: credential {credential.name!r}: "
                                 f"systemd-creds cannot decrypt {shown}: {why}")

    def __exit__(self, *exc: object) -> None:
        import shutil

        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
