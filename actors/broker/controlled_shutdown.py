"""Controlled shutdown, the broker's side (Kafka's ``KafkaServer.controlledShutdown``).

Before a broker stops gracefully it asks the active controller to move its leaderships
away, so that clients lose no partition. Up to ``controlled.shutdown.max.retries``
attempts, each of which:

1. finds the controller: ``/controller``, then that broker's ``/brokers/ids/<id>`` (when
   either is missing the previous attempt's controller is asked again, if any);
2. sends it ControlledShutdown(broker id, broker epoch) and waits up to
   ``request.timeout.ms``;
3. succeeds when the answer is NONE with no partition still led by this broker.

Between failed attempts it waits ``controlled.shutdown.retry.backoff.ms`` (also after the
last one, as Kafka does). When every attempt failed it gives up and the broker stops
anyway ("unclean shutdown"). Nothing is done when ``controlled.shutdown.enable`` is false.

The work runs in ``on_stop`` of this actor, which the broker spawns after its controller:
a node stops its actors in reverse start order, so this runs first, while the controller
(this broker's, if it is the active one), the log manager and the broker itself still
serve requests, as in Kafka, where ``controlledShutdown`` is the first step of
``KafkaServer.shutdown``.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from actors.runtime.actor import Actor
from actors.zk import kafka_zk
from actors.zk.store import StoreSession
from protocol.base import ActorRef
from protocol.control import ControlledShutdownRequest, ControlledShutdownResponse
from protocol.errors import AskTimeoutError, ErrorCode, RemoteError, StoreError
from protocol.ids import BrokerEpoch, BrokerId

log = structlog.get_logger("kemu.broker.controlled_shutdown")

CONTROLLED_SHUTDOWN_ACTOR = "controlled_shutdown"


class ControlledShutdownActor(Actor):
    def __init__(
        self,
        broker_id: BrokerId,
        *,
        session: Callable[[], StoreSession],
        broker_epoch: Callable[[], int],
        controller_ref: Callable[[BrokerId], ActorRef],
        enable: bool = True,
        max_retries: int = 3,
        retry_backoff_ms: int = 5000,
        request_timeout_ms: int = 30_000,
        name: str = CONTROLLED_SHUTDOWN_ACTOR,
    ) -> None:
        """``session`` and ``broker_epoch`` are read when the shutdown starts: the broker's
        current store session and registration epoch (they change after a session
        expiry); ``controller_ref`` addresses broker ``c``'s controller."""
        super().__init__(name)
        self.broker_id = broker_id
        self._session = session
        self._broker_epoch = broker_epoch
        self._controller_ref = controller_ref
        self.enable = enable
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.succeeded: bool | None = None
        """After a graceful stop: whether the controlled shutdown succeeded (None: not run)."""

    async def on_stop(self) -> None:
        if not self.enable:
            return
        self.trace("event", "controlled_shutdown_started", broker=self.broker_id)
        log.info("starting_controlled_shutdown", broker=self.broker_id)
        self.succeeded = await self._shut_down()
        if self.succeeded:
            log.info("controlled_shutdown_succeeded", broker=self.broker_id)
            self.trace("event", "controlled_shutdown_succeeded", broker=self.broker_id)
        else:
            log.warning(
                "proceeding_to_unclean_shutdown",
                broker=self.broker_id,
                detail="Proceeding to do an unclean shutdown as all the controlled shutdown "
                "attempts failed",
            )
            self.trace("event", "controlled_shutdown_failed", broker=self.broker_id)

    async def _shut_down(self) -> bool:
        target: BrokerId | None = None
        for attempt in range(1, self.max_retries + 1):
            found = await self._find_controller()
            if found is not None:  # else ask the previous attempt's controller, if any
                target = found
            if target is not None:
                error, remaining = await self._attempt(target)
                self.trace(
                    "event",
                    "controlled_shutdown_attempt",
                    broker=self.broker_id,
                    attempt=attempt,
                    controller=target,
                    error=error.name,
                    remaining=remaining,
                )
                if error is ErrorCode.NONE and not remaining:
                    return True
                log.info(
                    "controlled_shutdown_incomplete",
                    remaining_partitions=remaining,
                    error=error.name,
                )
            await self.clock.sleep(self.retry_backoff)
            log.warning("retrying_controlled_shutdown", broker=self.broker_id)
        return False

    async def _find_controller(self) -> BrokerId | None:
        try:
            session = self._session()
            controller_id = await kafka_zk.get_controller_id(session)
            if controller_id is None:
                log.info("no_controller_registered")
                return None
            if await kafka_zk.get_broker(session, controller_id) is None:
                log.info("controller_registration_not_available", controller=controller_id)
                return None
            return controller_id
        except StoreError as exc:
            log.warning("controller_lookup_failed", error=repr(exc))
            return None

    async def _attempt(self, controller_id: BrokerId) -> tuple[ErrorCode, list[str]]:
        """One request: the controller's error (a failed delivery counts as
        NETWORK_EXCEPTION) and the partitions this broker still leads."""
        request = ControlledShutdownRequest(
            broker_id=self.broker_id, broker_epoch=BrokerEpoch(self._broker_epoch())
        )
        try:
            reply = await self.ask(
                self._controller_ref(controller_id), request, timeout=self.request_timeout
            )
        except (AskTimeoutError, RemoteError) as exc:
            log.warning(
                "controlled_shutdown_request_failed",
                controller=controller_id,
                error=repr(exc),
            )
            return ErrorCode.NETWORK_EXCEPTION, []
        if not isinstance(reply, ControlledShutdownResponse):
            return ErrorCode.UNKNOWN_SERVER_ERROR, []
        return reply.error_code, [str(tp) for tp in reply.remaining_partitions]
