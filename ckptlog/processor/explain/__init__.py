"""Every decision explained, any moment replayed (contract §10): `History` in Python; the pure
story, explanation and one-run replay beside the Kafka/snapshot shell (source.py)."""
