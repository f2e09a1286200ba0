"""The table's screens: the dealer display and the roadmap scoreboard, fed only from published events and the status view."""
