"""The daemon's way up and way down: the start-up steps in their order (recover, hold the
history to the backends, start outbox, drivers, retention, control socket, display, then
READY=1), the parts they build, and the one shutdown that stops and closes them again.

None of it is the owner loop: it wires the daemon's collaborators around the loop in
``controller/service/daemon.py`` and reaches the daemon only through ``TableDaemon``
(daemon_surface.py)."""
