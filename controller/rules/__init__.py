"""The rules of Pok Deng: card codes, hand values, settlement, exact RTP.

Pure functions: no I/O, no clock. The bottom wing: imports nothing else of
the controller."""
