"""Nothing lost: the hash-chained journal, recovery, archives and retention,
the outbox.

Imports the table, the rules and the transports."""
