"""Integrations with training frameworks (each needs its own extra, e.g. `ckptlog[ray]`)."""
