"""What is generated from the table's own definitions rather than run by it: the state diagram
of docs/state-diagram.md, drawn from the procedure's tables (diagram.py), and whole-shoe table
scripts for tests, soak runs, simulators and benchmarks (scriptgen.py).

The daemon imports neither; both run as ``python -m controller.table.generators.<module>``."""
