"""What a bad configuration ends in: ``ConfigError`` listing every problem, and exit 78.

Apart from controller/service/config/settings.py so that the commands that only report a bad config
(``status``, ``watch``, ``supervisor``: controller/service/control/client.py) catch it without
importing the config reader and everything it reads (the table machine, yaml, the drivers).
"""

from __future__ import annotations

EX_CONFIG = 78  # sysexits.h: configuration error; the unit does not restart on it

MAX_ERRORS_LISTED = 50    # a broken file can make thousands; the first ones say enough
MAX_MESSAGE_CHARS = 500   # drivers quote option values whole


class ConfigError(Exception):
    """The configuration is not usable; ``errors`` lists every problem found."""

    def __init__(self, errors: list[str], source: str | None = None):
        self.errors = list(errors)
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(where + "; ".join(self.listed()))

    def listed(self) -> list[str]:
        """The errors to show: the first MAX_ERRORS_LISTED, each clipped, then how many more."""
        shown = [message[:MAX_MESSAGE_CHARS] + ("…" if len(message) > MAX_MESSAGE_CHARS else "")
                 for message in self.errors[:MAX_ERRORS_LISTED]]
        hidden = len(self.errors) - len(shown)
        return shown + ([f"… and {hidden} more"] if hidden else [])

    def report(self) -> str:
        """Plain text for stderr: one problem a line."""
        head = f"{self.source}: " if self.source else ""
        count = len(self.errors)
        lines = [f"{head}{count} configuration error{'s' if count != 1 else ''}:"]
        lines += [f"  {message}" for message in self.listed()]
        return "\n".join(lines)
