"""The metadata stores behind ``actors.zk.store.MetadataStore``: the embedded one (an
in-memory ZooKeeper), the same served to other processes (``remote``), and a real
ZooKeeper ensemble through aiozk (``zookeeper``; docs/zookeeper-adapter.md)."""

from cluster.store.embedded import EmbeddedStore as EmbeddedStore
from cluster.store.zookeeper import ZooKeeperStore as ZooKeeperStore
