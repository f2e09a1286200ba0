"""A pseudo-language catalogue, ``qps``, written as an operator adds a language: one
``qps.po`` in a locales directory (controller/display/catalogues.py) and ``display.language``
or ``?lang=qps``.

Every English word is bracketed, its letters accented and the text lengthened by a fifth
(``Player {n}`` -> ``[Ƥļàýéŕ {n}··]``): a word left in English, a key missing, a text cut
short or a box too small for a longer language shows at once, on a page or in ``watch``. (A
third longer overflows the scoreboard's one-line header at 1920x1080: its items never wrap.)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from controller.display import words

CODE = "qps"
#: every letter that names a rank or a suit accented too: "Statistics" left as "St…" would
#: spell the ten of spades to the sealing search
_ACCENTS = str.maketrans("aeiouyAEIOUYcnlrsPBDTSHCKQJhdtkqj",
                         "àéîöüýÀÉÎÖÜÝçñļŕšƤƁƊŤŠĤĈĶǪĴĥďŧķǫĵ")
_PLACEHOLDER = re.compile(r"(\{\w+\})")


def pseudo(text: str) -> str:
    """``[`` accented words, placeholders as they are, ``·`` for a fifth more length ``]``;
    a number's format with no letters (the odds ``{a}:{b}``) stays as it is, as in any
    language."""
    parts = _PLACEHOLDER.split(text)
    if not any(c.isalpha() for p in parts[::2] for c in p):
        return text
    said = "".join(p if _PLACEHOLDER.fullmatch(p) else p.translate(_ACCENTS) for p in parts)
    return f"[{said}{'·' * (len(text) // 5)}]"


def pseudo_words() -> dict[str, str]:
    """The pseudo-language's words, by key: every key English has."""
    own = {key: pseudo(text) for key, text in words.EN.items()}
    own["language"] = "Pseudo"
    own["language.direction"] = "ltr"
    return own


def write_catalogue(directory: Path, drop: tuple[str, ...] = (),
                    change: dict[str, str] | None = None) -> Path:
    """``directory/qps.po`` (Babel writes it, as a translator's tool would); ``drop`` leaves
    keys out and ``change`` sets words, for a catalogue that is wrong on purpose."""
    catalogue = Catalog(locale=None, project="pokdeng-table", language_team="Pseudo",
                        revision_date=datetime.now(UTC), last_translator="pokdeng-table tests",
                        fuzzy=False)
    catalogue.mime_headers = [*catalogue.mime_headers, ("Language", CODE)]
    for key, text in {**pseudo_words(), **(change or {})}.items():
        if key not in drop:
            catalogue.add(key, text, auto_comments=[words.EN[key]])
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{CODE}.po"
    with open(path, "wb") as f:
        write_po(f, catalogue, width=0)
    return path
