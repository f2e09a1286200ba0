"""pokdeng-table: the dealer-table controller of a live Pok Deng table."""

__version__ = "0.1.0"
