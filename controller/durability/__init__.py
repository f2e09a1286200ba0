"""Nothing lost: the hash-chained journal itself at the root (chain, checks, checkpoints, head
file, recovery, the disk), and its rooms:

* ``delivery/``: what leaves the table and what the backends hold (outbox, anchors, held,
  verify --against);
* ``archives/``: retention, archiving closed shoes and reading them back.

Imports the table, the rules and the transports."""
