"""A controller scenario whose whole trace must be reproducible: three brokers, topics
created, a broker crash, the controller's session expiry, a partition addition.

``python -m tests.support.controller_scenario`` prints the trace as JSON lines (the determinism
test compares it across interpreters with different hash seeds).
"""

from __future__ import annotations

import sys

import anyio
import msgspec

from actors.runtime.clock import run_virtual
from actors.zk import kafka_zk
from protocol.ids import TopicName
from tests.support.fake_brokers import ControllerCluster


async def _scenario() -> bytes:
    trace = b""
    async with anyio.create_task_group() as tg:
        cluster = ControllerCluster(tg)
        try:
            for i in range(3):
                await cluster.start_broker(i)
            await cluster.active_controller()
            await cluster.create_topic("alpha", {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})
            await cluster.create_topic("beta", {0: [2], 1: [1, 0]})
            await cluster.settle()
            await cluster.crash_broker(1)
            await cluster.settle()
            active = await cluster.active_controller()
            await cluster.expire_session(active.broker_id)
            await cluster.active_controller()
            await cluster.settle()
            await kafka_zk.set_topic_assignment(
                await cluster.admin(), TopicName("beta"), {0: [2], 1: [1, 0], 2: [0, 2]}
            )
            await cluster.settle()
            await cluster.start_broker(1)
            await cluster.settle()
            trace = b"".join(msgspec.json.encode(e) + b"\n" for e in cluster.sink.events)
        finally:
            await cluster.aclose()
            tg.cancel_scope.cancel()
    return trace


def scenario_trace() -> bytes:
    return run_virtual(_scenario)


if __name__ == "__main__":
    sys.stdout.buffer.write(scenario_trace())
