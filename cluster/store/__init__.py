"""kemu."""

from cluster.store.embedded import EmbeddedStore as EmbeddedStore
from cluster.store.zookeeper import ZooKeeperStore as ZooKeeperStore
