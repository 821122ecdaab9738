"""``ZkNodeChangeNotificationListener.purgeObsoleteNotifications``: change notifications
created more than 15 minutes before a broker processes notifications are deleted, the
newer ones kept; on the embedded store, on the virtual clock (15 minutes pass at once)."""

from __future__ import annotations

from actors.runtime.clock import VirtualClock, run_virtual
from actors.zk import kafka_zk
from cluster.store.embedded import EmbeddedStore
from protocol.ids import TopicName


def test_notifications_older_than_fifteen_minutes_are_purged() -> None:
    async def body() -> tuple[list[str], list[str], list[str]]:
        clock = VirtualClock()
        store = EmbeddedStore(clock=clock)
        session = await store.open_session()
        first = await kafka_zk.change_topic_config(session, TopicName("t"), {"a": "1"})
        await clock.sleep(kafka_zk.CHANGE_EXPIRATION_MS / 1000)
        second = await kafka_zk.change_topic_config(session, TopicName("t"), {"a": "2"})
        await clock.sleep(0.001)
        third = await kafka_zk.change_topic_config(session, TopicName("t"), {"a": "3"})
        names = await kafka_zk.config_change_names(session)
        assert names == [first, second, third]
        purged = await kafka_zk.purge_obsolete_config_changes(session, clock.wall_ms(), names)
        left = await kafka_zk.config_change_names(session)
        # now the first is 15 minutes and 1 ms old, the second 1 ms, the third new
        again = await kafka_zk.purge_obsolete_config_changes(session, clock.wall_ms(), names)
        await store.aclose()
        return purged, left, again

    purged, left, again = run_virtual(body)
    assert purged == ["config_change_0000000000"]
    assert left == ["config_change_0000000001", "config_change_0000000002"]
    assert again == []  # the gone one is skipped, the others are not old enough


def test_a_notification_exactly_fifteen_minutes_old_stays() -> None:
    async def body() -> list[str]:
        clock = VirtualClock()
        store = EmbeddedStore(clock=clock)
        session = await store.open_session()
        await kafka_zk.change_topic_config(session, TopicName("t"), {"a": "1"})
        await clock.sleep(kafka_zk.CHANGE_EXPIRATION_MS / 1000)
        names = await kafka_zk.config_change_names(session)
        purged = await kafka_zk.purge_obsolete_config_changes(session, clock.wall_ms(), names)
        await store.aclose()
        return purged

    assert run_virtual(body) == []
