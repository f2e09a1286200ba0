"""The package's maintainer scripts run as root and never work in the table's state directory
(docs/install.md, "Root's commands in the table's state directory"): the daemon's user owns
it and could plant links there. The only mention is purge's list of what it keeps."""

from __future__ import annotations

import re
from pathlib import Path

DEBIAN = Path(__file__).resolve().parents[2] / "packaging" / "debian"
SCRIPTS = ("preinst", "postinst", "prerm", "postrm", "drain.sh")
STATE = "/var/lib/pokdeng-table"
#: purge names what it keeps (an existence test and an echo: nothing is opened or changed)
KEPT_LIST = f"for kept in {STATE} /etc/pokdeng-table; do"
#: the state directory itself or a path in it; not /var/lib/pokdeng-table-metrics, the
#: metrics' directory, which the package makes in root's /var/lib where no user plants links
IN_STATE = re.compile(re.escape(STATE) + r"(?![\w-])")


def test_no_maintainer_script_works_in_the_state_directory() -> None:
    uses = [(name, line.strip()) for name in SCRIPTS
            for line in (DEBIAN / name).read_text().splitlines()
            if IN_STATE.search(line) and not line.lstrip().startswith("#")]
    assert uses == [("postrm", KEPT_LIST)]
