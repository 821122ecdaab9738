"""A Kafka broker: the actor, its request handlers and its purgatory."""
