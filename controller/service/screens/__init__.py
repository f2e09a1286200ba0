"""The people's screens in a process of their own: the daemon's sealed feed to it (``wire``),
the daemon's side that starts, feeds and restarts it (``link``), and the process (``child``)."""
