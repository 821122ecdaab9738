"""Where the other brokers of a ``kemu broker run`` cluster are: their registrations.

A broker started by ``kemu broker run`` is given no address book: its peers may run on
other hosts and come and go. Each broker registers the address of its node (kemu's
inter-broker transport) in ``/brokers/ids/<id>`` as the listener ``INTERNAL_LISTENER``,
after its Kafka listener, as a Kafka broker registers its inter-broker listener; and its
TCP transport asks a ``BrokerDirectory`` (its ``Resolver``) where node ``broker-<id>`` is
whenever it opens a connection to it, as Kafka's ``ControllerChannelManager`` and replica
fetchers connect to the endpoints the registrations name. The directory reads the
registration through a store session of its own, opened up front (so an unreachable
ZooKeeper fails the start at once) and opened again if it expires (a broker that was
frozen, say).
"""

from __future__ import annotations

import contextlib

import anyio

from actors.broker.names import INTERNAL_LISTENER, broker_id_of
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.network.tcp import Address
from protocol import zkdata
from protocol.errors import SessionExpiredError, StoreError, ZkDataError
from protocol.ids import BrokerId

CLOSE_TIMEOUT = 3.0  # seconds for closing the directory's session


class BrokerDirectory:
    """Resolves ``broker-<id>`` to the internal address its registration names."""

    def __init__(self, store: MetadataStore, *, name: str, timeout: float) -> None:
        self._store = store
        self._name = name
        self._timeout = timeout
        self._session: StoreSession | None = None
        self._lock = anyio.Lock()

    async def open(self) -> None:
        """Open the directory's session (``ConnectionLossError`` if the store cannot be
        reached within the timeout)."""
        await self._current()

    async def _current(self) -> StoreSession:
        async with self._lock:
            if self._session is None:
                self._session = await self._store.open_session(
                    timeout=self._timeout, name=self._name
                )
            return self._session

    async def check_unregistered(self, broker_id: int) -> None:
        """``NodeExistsError`` (Kafka's words, ``kafka_zk.registered_elsewhere``) if a live
        session holds ``/brokers/ids/<broker_id>``: checked before the broker opens its
        log dir, so that a broker started with the id of another one leaves nothing
        behind (a broker that registers at the same moment still fails at its own
        registration, as Kafka's does)."""
        session = await self._current()
        path = zkdata.broker_path(BrokerId(broker_id))
        stat = await session.exists(path)
        if stat is not None:
            raise kafka_zk.registered_elsewhere(path, stat.ephemeral_owner, session.session_id)

    async def __call__(self, node_id: str) -> Address | None:
        """The address registered for ``node_id`` (a broker's node); None if it is no
        broker's, or not registered (or the store cannot say now)."""
        broker_id = broker_id_of(node_id)
        if broker_id is None:
            return None
        for _ in range(2):  # a second time in a new session, if this one expired
            try:
                session = await self._current()
                registered = await kafka_zk.get_broker(session, BrokerId(broker_id))
            except SessionExpiredError:
                await self._discard()
                continue
            except (StoreError, ZkDataError):
                return None
            if registered is None:
                return None
            return next(
                (
                    (e.host, e.port)
                    for e in registered.registration.endpoints
                    if e.listener == INTERNAL_LISTENER
                ),
                None,
            )
        return None

    async def _discard(self) -> None:
        async with self._lock:
            session, self._session = self._session, None
        if session is not None:
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(CLOSE_TIMEOUT),
                contextlib.suppress(StoreError),  # expired, or the store is gone
            ):
                await session.close()

    async def aclose(self) -> None:
        """Close the directory's session."""
        await self._discard()
