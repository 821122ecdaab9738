"""The Kafka protocol side of kemu: the listener real clients talk to, and a minimal client."""
