"""The local control socket: the server the daemon runs (server), who may do what on it
(access), the line protocol (protocol), the client the commands use (client), the daemon's
answers to it (handler) and the supervisor actions it remembers (last_actions).
"""
