"""Device drivers: they turn bytes from the shoe, panel and switch into table inputs."""
