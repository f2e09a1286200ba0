"""The table: inputs, the procedure machine, events and their schemas, faults.

Pure and deterministic (the clock is an input); imports only the rules wing."""
