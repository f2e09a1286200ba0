"""The daemon's configuration: reading the YAML (yaml_reader), checking every key into typed
settings (settings), the errors that name a key path (errors), and the checks a start makes
of the secrets and groups a config names (startup_checks).
"""
