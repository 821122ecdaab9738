"""Kafka's ZooKeeper side: the metadata-store interface, ``KafkaZkClient``'s operations and
watch dispatch."""
