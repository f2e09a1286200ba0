"""What the daemon trusts before and while it deals: the journal opened only when it holds
against its head file (journal_trust) and its key (journal_key), the full check after READY
(journal_check, with its words in journal_check_text), the backends' word on where they stand
(history_guard), and the software's own identity (software_identity).
"""
