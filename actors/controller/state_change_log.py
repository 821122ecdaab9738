"""The state-change log (Kafka's ``StateChangeLogger``): one traced event per transition,
and its line in the broker's ``state-change.log`` (cluster.logging): a partition coming
online with its leader at INFO, every other transition at DEBUG.

``transition`` is the only way the state machines record a state change; ``invalid`` and
``failed`` record a refused or failed one (traced as errors, the state left unchanged).
Trace fields are stable: ``machine`` (partition|replica), ``topic``, ``partition``,
``replica`` (None for partitions), ``from_state``, ``to_state``, ``leader``,
``leader_epoch``, ``controller_epoch``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import structlog

from actors.runtime.tracer import TraceFn, Tracer
from protocol.control import TopicPartition

log = structlog.get_logger("kemu.controller.state_change")  # Kafka's state.change.logger

_ONLINE: Final = "OnlinePartition"


class StateChangeLogger:
    def __init__(
        self, controller_id: int, trace: TraceFn | None, *, tracer: Tracer | None = None
    ) -> None:
        """``tracer``: the one ``trace`` emits to, when known; while no sink listens to
        it, a transition only counts its event (``Tracer.skip``) instead of building it
        (1,000 topics of 10 partitions x RF 3 make 80,000 transitions)."""
        self.controller_id = controller_id
        self._trace = trace
        self._tracer = tracer
        # the lowest level logged, read once: below it a transition builds no log line
        self._log_level = next(
            (n for n in (logging.DEBUG, logging.INFO) if log.is_enabled_for(n)), logging.WARNING
        )

    def records(self, to_state: str) -> bool:
        """Whether a transition to ``to_state`` is logged or traced now, i.e. whether its
        ``leader`` and ``leader_epoch`` are read (otherwise ``transition`` only counts its
        trace event): a state machine looks them up only then."""
        level = logging.INFO if to_state == _ONLINE else logging.DEBUG
        if level >= self._log_level:
            return True
        return self._trace is not None and (self._tracer is None or self._tracer.enabled)

    def skip_transitions(self, count: int) -> None:
        """``count`` transitions that ``records`` said are neither logged nor traced: what
        ``transition`` does for each of them (their trace events counted, when a trace is
        wired to a disabled tracer), in one step."""
        if self._trace is not None and self._tracer is not None and not self._tracer.enabled:
            self._tracer.skip(count)

    def transition(
        self,
        machine: str,
        tp: TopicPartition,
        replica: int | None,
        from_state: str,
        to_state: str,
        *,
        controller_epoch: int,
        leader: int | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        # Kafka logs a partition coming online (its leader elected) at INFO, the other
        # transitions at TRACE (our DEBUG), to state-change.log.
        level = logging.INFO if to_state == _ONLINE else logging.DEBUG
        if level >= self._log_level:
            log.log(
                level,
                f"{machine}_state_changed",
                partition=str(tp),
                replica=replica,
                from_state=from_state,
                to_state=to_state,
                leader=leader,
                leader_epoch=leader_epoch,
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
            )
        if self._tracer is not None and not self._tracer.enabled:
            if self._trace is not None:
                self._tracer.skip()
            return
        if self._trace is not None:
            self._trace(
                "transition",
                machine,
                topic=tp.topic,
                partition=tp.partition,
                replica=replica,
                from_state=from_state,
                to_state=to_state,
                leader=leader,
                leader_epoch=leader_epoch,
                controller_epoch=controller_epoch,
            )

    def unclean_election(
        self,
        tp: TopicPartition,
        *,
        leader: int,
        leader_epoch: int,
        isr_before: tuple[int, ...],
        controller_epoch: int,
    ) -> None:
        """A leader elected from outside the ISR (Kafka logs it as a warning: "Unclean
        leader election. Partition ... has been elected as leader ... although it was not
        in ISR"); what the ISR had acknowledged may be lost."""
        log.warning(
            "unclean_leader_elected",
            partition=str(tp),
            leader=leader,
            leader_epoch=leader_epoch,
            isr_before=list(isr_before),
        )
        if self._trace is not None:
            self._trace(
                "event",
                "unclean_leader_elected",
                topic=tp.topic,
                partition=tp.partition,
                leader=leader,
                leader_epoch=leader_epoch,
                isr_before=list(isr_before),
                controller_epoch=controller_epoch,
            )

    def invalid(
        self,
        machine: str,
        tp: TopicPartition,
        replica: int | None,
        from_state: str,
        to_state: str,
        *,
        controller_epoch: int,
        valid_previous: list[str],
    ) -> None:
        """Kafka's IllegalStateException in the state-change log: nothing changes."""
        self._refused(
            "invalid_transition",
            "invalid_state_transition",
            machine,
            tp,
            replica,
            from_state,
            to_state,
            controller_epoch=controller_epoch,
            valid_previous=valid_previous,
        )

    def failed(
        self,
        machine: str,
        tp: TopicPartition,
        replica: int | None,
        from_state: str,
        to_state: str,
        *,
        controller_epoch: int,
        error: BaseException | str,
    ) -> None:
        """A state change that could not be made (no live replica, store error, ...)."""
        detail = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self._refused(
            "state_change_failed",
            "state_change_failed",
            machine,
            tp,
            replica,
            from_state,
            to_state,
            controller_epoch=controller_epoch,
            detail=detail,
        )

    def _refused(
        self,
        trace_type: str,
        log_event: str,
        machine: str,
        tp: TopicPartition,
        replica: int | None,
        from_state: str,
        to_state: str,
        *,
        controller_epoch: int,
        **extra: Any,
    ) -> None:
        """One refused or failed change: logged for people, traced as an error."""
        common = {
            "machine": machine,
            "replica": replica,
            "from_state": from_state,
            "to_state": to_state,
            "controller_epoch": controller_epoch,
        }
        log.error(log_event, partition=str(tp), **common, **extra)
        self._error(trace_type, topic=tp.topic, partition=tp.partition, **common, **extra)

    def _error(self, type_: str, **fields: Any) -> None:
        if self._trace is not None:
            self._trace("error", type_, **fields)
