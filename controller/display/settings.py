"""Where the display listens and how many screens it serves (the config's ``display:``)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from controller.display.studio import StudioSettings

MAX_CLIENTS_DEFAULT = 16


@dataclass(frozen=True)
class DisplaySettings:
    host: str = "127.0.0.1"
    port: int = 8080
    max_clients: int = MAX_CLIENTS_DEFAULT
    #: the names the screens reach the table by, beside localhost, this machine's own names and
    #: any IP address (a request for another name is refused: DNS rebinding)
    allowed_hosts: tuple[str, ...] = ()
    #: the screens' language unless a page asks for another (``?lang=``): en, fil, ms, fa, ja
    language: str = "en"
    #: the stream graphic's limits, currency and colours (``display.studio``)
    studio: StudioSettings = field(default_factory=StudioSettings)

    @property
    def listen(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(text: str) -> tuple[str, int]:
    """``"127.0.0.1:8080"``, ``"[::1]:8080"`` or ``"0.0.0.0:80"`` -> (host, port); port 0 asks
    the system for a free one. Raises ValueError saying what is wrong."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ValueError("must be ADDRESS:PORT, e.g. 127.0.0.1:8080")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise ValueError(f"{host!r} is not an IP address (or localhost)") from None
        host = "127.0.0.1"
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"port must be a number from 0 to 65535, got {port_text!r}")
    return host, int(port_text)
