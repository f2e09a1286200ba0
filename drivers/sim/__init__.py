"""Simulated devices for the demo and the tests: a shoe on a pty, an emulated
USB panel (pyusb backend)."""
