"""The running table: the daemon and its owner loop at this wing's root (daemon, the status
board it publishes, the storage fault and the inputs it holds while the journal cannot take
them, the panel's LEDs, the display's link, recovery's reports, the modes of the files it
makes), and its rooms:

- ``startup/``: the daemon's way up (the steps in their order, the parts they build) and down;
- ``config/``: reading and checking the configuration;
- ``control/``: the local control socket, server, client and the daemon's answers;
- ``clock/``: table time, wall-clock steps and synchronisation;
- ``trust/``: the journal trusted before and while the table deals, and the software's identity;
- ``telemetry/``: health topic, metrics, log and systemd notify.

Imports every wing below it."""
