"""kemu."""

from cluster.store.embedded import EmbeddedStore as EmbeddedStore
