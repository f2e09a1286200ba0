"""The running table: the daemon and its owner loop, the control socket,
configuration, sd_notify and logging.

Imports every wing below it."""
