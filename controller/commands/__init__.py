"""Subcommands of the pokdeng-table CLI, one module each."""
