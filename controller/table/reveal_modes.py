"""How a round's hands are revealed: all at once (``auto``) or one per dealer press (``button``).

A module of its own so that ``pokdeng-table replay --help`` names the modes without loading the
table's records (their dataclasses, the rules).
"""

REVEAL_MODES = ("auto", "button")
