"""Retention: closed, delivered shoes archived out of the live journal (archive), the runs
that do it in the daemon, at idle priority in a child process (retention, retention_run), and
resends that read the archived events back for a backend asking from further back
(archive_resend).

The journal itself (``controller/durability/``) keeps the cut; this room moves records out of
it and reads them back.
"""
