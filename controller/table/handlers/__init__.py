"""How the table machine handles each source of input, one part per source: the hold
(pause, resume, the key switch), the shoe's cards, the dealer's buttons, the supervisor's
commands, and the reports from devices, the clock, the backends and the software.

Each part takes the machine's steps through ``MachineCore`` (``controller/table/machine_state.py``)
and never the machine itself; only ``TableMachine`` (``controller/table/machine.py``) builds
them and hands them its inputs."""
