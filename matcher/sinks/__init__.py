"""Where events go: JSON lines (`events`), Prometheus counters (`metrics`), a webhook."""
