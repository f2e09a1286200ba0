"""What leaves the table and what the backends hold: the outbox (one delivery thread per
transport, in seq order), the events handed to it in memory (handoff), the anchor each event
carries out (anchors), where a backend stands held against the journal (held), and the journal
held against what a backend received (against, ``journal verify --against``).

The journal itself (``controller/durability/``) is the source of truth; this room reads it.
"""
