"""The broker's metadata cache as UpdateMetadata requests change it (Kafka's
``MetadataCache.updateMetadata``): partitions added and replaced, removed by leader -2, a
topic gone with its last partition, the per-topic tables read as mappings."""

from __future__ import annotations

import pytest

from actors.broker.metadata_cache import MetadataCache
from protocol.control import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, TopicName


def _state(topic: str, partition: int, leader: int, epoch: int = 0) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(
        topic=TopicName(topic),
        partition=partition,
        controller_epoch=ControllerEpoch(1),
        leader=BrokerId(leader),
        leader_epoch=LeaderEpoch(epoch),
        isr=(BrokerId(max(leader, 0)),),
        zk_version=0,
        replicas=(BrokerId(max(leader, 0)),),
    )


def _update(*states: UpdateMetadataPartitionState) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=BrokerId(0),
        controller_epoch=ControllerEpoch(1),
        broker_epoch=BrokerEpoch(-1),
        partition_states=states,
        live_brokers=(),
    )


def test_update_adds_replaces_and_removes_partitions_and_names_the_topics_it_touched() -> None:
    cache = MetadataCache()
    touched = cache.update(_update(_state("a", 2, 1), _state("a", 0, NO_LEADER), _state("b", 0, 2)))
    assert touched == ({"a", "b"}, ())
    assert dict(cache.partitions("a").items()) == {
        0: _state("a", 0, NO_LEADER),
        2: _state("a", 2, 1),
    }
    assert sorted(cache.partitions("a")) == [0, 2]
    assert len(cache.partitions("a")) == 2
    assert 1 not in cache.partitions("a")
    assert cache.partitions("a").get(1) is None
    assert cache.partitions("a").get(7) is None
    assert cache.partitions("a").get(-1) is None
    absent = _state("a", 1, 9)
    assert cache.partitions("a").get(1, absent) is absent  # a hole: the default, as a dict's
    assert cache.partitions("a").get(7, absent) is absent
    assert cache.partitions("a").get(2, absent) == _state("a", 2, 1)
    assert not cache.all_partitions_have_leaders("a")
    assert cache.update(_update(_state("a", 0, 3, epoch=1))).touched == {"a"}
    assert cache.partitions("a")[0] == _state("a", 0, 3, epoch=1)
    assert cache.all_partitions_have_leaders("a", expected=2)
    assert not cache.all_partitions_have_leaders("a", expected=3)
    assert cache.replica_count() == 3

    # A topic being deleted: its partitions announced with leader -2 go one by one, then the
    # topic; a partition announced again afterwards makes a new table.
    cache.update(_update(_state("a", 2, LEADER_DURING_DELETE)))
    assert list(cache.partitions("a")) == [0]
    assert cache.update(
        _update(_state("a", 0, LEADER_DURING_DELETE), _state("a", 1, 4), _state("b", 5, 2))
    ).deleted == (("a", 0),)
    assert dict(cache.partitions("a").items()) == {1: _state("a", 1, 4)}
    assert list(cache.partitions("b")) == [0, 5]
    cache.update(_update(_state("a", 1, LEADER_DURING_DELETE)))
    assert not cache.contains("a")
    assert cache.topic_names() == ["b"]
    assert dict(cache.partitions("a").items()) == {}  # unknown: empty
    with pytest.raises(KeyError):
        cache.partitions("b")[3]
    assert cache.topics[TopicName("b")] == {0: _state("b", 0, 2), 5: _state("b", 5, 2)}


def test_updates_counts_every_request_applied() -> None:
    """What a reader polling the cache (the failover bench) watches for a change."""
    cache = MetadataCache()
    assert cache.updates == 0
    cache.update(_update(_state("a", 0, 1)))
    cache.update(_update())  # a request with only the live brokers counts too
    assert cache.updates == 2


def test_new_topics_runs_become_tables_whatever_order_the_states_come_in() -> None:
    """A new topic's partitions 0, 1, ... in order are its table as they come; partitions out
    of order, with a hole, split by another topic or deleted in the same request end up as
    applied one state at a time."""
    cache = MetadataCache()
    update = cache.update(
        _update(
            _state("a", 0, 1),
            _state("a", 1, 2),
            _state("b", 1, 1),
            _state("b", 0, 2),
            _state("a", 2, 3),
            _state("c", 0, 1),
            _state("c", 1, LEADER_DURING_DELETE),
            _state("d", 0, LEADER_DURING_DELETE),
            _state("e", 1, 1),
        )
    )
    assert update.touched == {"a", "b", "c", "d", "e"}
    assert update.deleted == (("c", 1), ("d", 0))
    assert dict(cache.partitions("a").items()) == {
        0: _state("a", 0, 1),
        1: _state("a", 1, 2),
        2: _state("a", 2, 3),
    }
    assert dict(cache.partitions("b").items()) == {0: _state("b", 0, 2), 1: _state("b", 1, 1)}
    assert dict(cache.partitions("c").items()) == {0: _state("c", 0, 1)}
    assert not cache.contains("d")
    assert list(cache.partitions("e")) == [1]
    assert len(cache.partitions("e")) == 1
    assert cache.replica_count() == 7


def test_a_known_topics_runs_replace_fill_and_extend_its_table() -> None:
    """A new controller's UpdateMetadata names known partitions in its own order, in runs
    of a topic's states broken by others': each state replaces its partition's, fills a
    hole or extends the table; the count follows; a run with a deletion still deletes."""
    cache = MetadataCache()
    cache.update(_update(_state("a", 0, 1), _state("a", 2, 1)))  # a hole at 1
    cache.update(
        _update(
            _state("a", 2, 3, epoch=1),
            _state("b", 0, 2),
            _state("a", 1, 3),
            _state("a", 0, 3, epoch=1),
            _state("a", 5, 3),
            _state("b", 1, 2),
        )
    )
    assert dict(cache.partitions("a").items()) == {
        0: _state("a", 0, 3, epoch=1),
        1: _state("a", 1, 3),
        2: _state("a", 2, 3, epoch=1),
        5: _state("a", 5, 3),
    }
    assert len(cache.partitions("a")) == 4
    assert cache.partitions("a").get(4) is None
    assert dict(cache.partitions("b").items()) == {0: _state("b", 0, 2), 1: _state("b", 1, 2)}
    update = cache.update(_update(_state("a", 1, 4), _state("a", 2, LEADER_DURING_DELETE)))
    assert update.deleted == (("a", 2),)
    assert dict(cache.partitions("a").items()) == {
        0: _state("a", 0, 3, epoch=1),
        1: _state("a", 1, 4),
        5: _state("a", 5, 3),
    }
    assert len(cache.partitions("a")) == 3
