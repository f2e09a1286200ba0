"""The package's maintainer scripts run as root and never work in the table's state directory
(docs/install.md, "Root's commands in the table's state directory"): the daemon's user owns
it and could plant links there. The only mention is purge's list of what it keeps."""

from __future__ import annotations

from pathlib import Path

DEBIAN = Path(__file__).resolve().parents[2] / "packaging" / "debian"
SCRIPTS = ("preinst", "postinst", "prerm", "postrm", "drain.sh")
STATE = "/var/lib/pokdeng-table"
#: purge names what it keeps (an existence test and an echo: nothing is opened or changed)
KEPT_LIST = f"for kept in {STATE} /etc/pokdeng-table; do"


def test_no_maintainer_script_works_in_the_state_directory() -> None:
    uses = [(name, line.strip()) for name in SCRIPTS
            for line in (DEBIAN / name).read_text().splitlines()
            if STATE in line and not line.lstrip().startswith("#")]
    assert uses == [("postrm", KEPT_LIST)]
