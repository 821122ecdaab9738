"""The watches a ZooKeeper session has armed: kept by the adapter, not by aiozk.

A watch is recorded when the server's reply to the request that arms it is read, in wire
order with the notifications (as the Java client's ``ZooKeeper.WatchRegistration``), so
no notification overtakes its registration; a notification fires it once. After a
reconnect every armed watch is sent again with ``SetWatches``. See
docs/zookeeper-adapter.md, "Watches".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aiozk import protocol as zk_proto

from protocol.store import WatchKind

_SET_WATCHES_BATCH = 128 * 1024  # path bytes per SetWatches (as the Java client)


class ArmedWatches:
    """One session's armed watches, by full path. Pure data: the session's read loop
    (replies and notifications, in wire order) and its repair loop use it, one at a time
    on the event loop."""

    def __init__(self) -> None:
        # Data watches remember whether the node existed when armed (a data watch) or not
        # (an exist watch): SetWatches sends them apart.
        self._data: dict[str, bool] = {}
        self._child: set[str] = set()

    def armed_data(self, full: str, *, existed: bool) -> None:
        """A get or exists with a watch on ``full`` was answered."""
        self._data[full] = existed

    def armed_child(self, full: str) -> None:
        """A child listing with a watch on ``full`` was answered."""
        self._child.add(full)

    def fire(self, event: Any) -> WatchKind | None:
        """The watch a notification (aiozk's ``WatchEvent``) fires, disarmed; None if no
        watch of ours is armed for it. A deleted node watched for data and children fires
        once: the server sends one notification for both."""
        full = event.path
        if event.type == zk_proto.WatchEvent.CREATED:
            if self._data.pop(full, None) is not None:
                return WatchKind.CREATED
        elif event.type == zk_proto.WatchEvent.DATA_CHANGED:
            if self._data.pop(full, None) is not None:
                return WatchKind.DATA_CHANGED
        elif event.type == zk_proto.WatchEvent.CHILDREN_CHANGED:
            if full in self._child:
                self._child.discard(full)
                return WatchKind.CHILDREN_CHANGED
        elif event.type == zk_proto.WatchEvent.DELETED:
            data = self._data.pop(full, None) is not None
            if data or full in self._child:
                self._child.discard(full)
                return WatchKind.DELETED
        return None

    def clear(self) -> None:
        self._data.clear()
        self._child.clear()

    def set_watches_requests(self, relative_zxid: int) -> Iterator[Any]:
        """SetWatches requests for every armed watch, relative to the last zxid the
        session saw, each under the batch size."""
        lists: dict[str, list[str]] = {"data": [], "exist": [], "child": []}
        size = 0

        def request() -> Any:
            return zk_proto.SetWatchesRequest(
                relative_zxid=relative_zxid,
                data_watches=lists["data"],
                exist_watches=lists["exist"],
                child_watches=lists["child"],
            )

        armed = [("data" if existed else "exist", p) for p, existed in self._data.items()]
        armed += [("child", p) for p in sorted(self._child)]
        for kind, path in armed:
            if size + len(path) > _SET_WATCHES_BATCH and size:
                yield request()
                lists = {"data": [], "exist": [], "child": []}
                size = 0
            lists[kind].append(path)
            size += len(path.encode())
        if size:
            yield request()
