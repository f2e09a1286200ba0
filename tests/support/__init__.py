"""What the tests share: helpers for the daemon, devices, journals, backends and the
sealing search. Imported as ``support.<module>`` (tests/ is on sys.path through conftest.py)."""
