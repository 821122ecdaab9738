"""A direct in-memory wire for runtime unit tests: no faults, no tracing, no transport.

The real network (cluster.network) is tested on its own; runtime tests use this fake so
that they pin the runtime's behaviour alone.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.envelope import Envelope


class DirectWire:
    def __init__(self) -> None:
        self.nodes: dict[str, Callable[[Envelope], None]] = {}
        self.sent: list[Envelope] = []
        self.blocked: set[str] = set()  # node ids whose incoming messages vanish

    async def attach(self, node_id: str, deliver: Callable[[Envelope], None]) -> _Postman:
        self.nodes[node_id] = deliver
        return _Postman(self, node_id)

    def post(self, env: Envelope) -> None:
        self.sent.append(env)
        if env.dst.node in self.blocked:
            return
        deliver = self.nodes.get(env.dst.node)
        if deliver is not None:
            deliver(env)


class _Postman:
    def __init__(self, wire: DirectWire, node_id: str) -> None:
        self._wire = wire
        self._node_id = node_id

    def post(self, env: Envelope) -> None:
        self._wire.post(env)

    def close(self) -> None:
        self._wire.nodes.pop(self._node_id, None)
