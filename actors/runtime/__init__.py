"""The actor runtime: nodes, actors, mailboxes, the clock, the tracer, freezing a node."""
