"""What the table tells the people and systems that watch it, never a sealed card: the MQTT
health topic (health, health_reporter), the Prometheus textfile (metrics, metrics_writer), the
structured log (logging_setup) and systemd's notify socket (notify).
"""
