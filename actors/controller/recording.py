"""Recording the controller's inputs and outputs, so that a trace can be replayed.

With the tracer detail ``controller_inputs`` on (``Tracer(details=...)``: chaos runs and
``kemu up --trace`` turn it on), every controller traces, besides its usual events:

* ``controller_replay_init`` once, when it starts: its ``config``, ``registration`` and
  ``broker_epoch`` (what ``actors.controller.replay`` builds the controller from);
* ``controller_input`` at the start of each event it processes: the typed event, encoded
  losslessly (``encode_event``); a callback field (a reply to a waiting caller) is
  recorded as ``true`` (``null`` when absent) and replayed as a callback that does nothing;
* ``controller_store`` after each call on its store session, with the call's arguments and
  its outcome (``RecordingSession``): reads are inputs (the replay answers them from the
  recording), writes are outputs (compared) whose results are inputs too;
* ``controller_clock`` for each wall-clock reading (the ``/controller`` timestamp);
* ``controller_request`` for each request handed to the channel (type and payload).

State transitions are traced already (kind ``transition``). The event names and field
shapes are documented in docs/trace-schema.md.
"""

from __future__ import annotations

import base64
import collections.abc
import dataclasses
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from actors.controller.events import ControllerEvent, ControllerEventUnion
from actors.runtime.tracer import TraceFn
from actors.zk.store import ForwardingSession, StoreSession
from protocol.errors import StoreError, TransactionFailedError
from protocol.store import OpResult, Stat, StoreOp

T = TypeVar("T")

CONTROLLER_INPUTS = "controller_inputs"
"""The tracer detail that turns recording on."""

INIT = "controller_replay_init"
INPUT = "controller_input"
STORE = "controller_store"
CLOCK = "controller_clock"
REQUEST = "controller_request"

RECORD_TYPES = frozenset({INIT, INPUT, STORE, CLOCK, REQUEST})
"""Every trace type this module adds (docs/trace-schema.md, "Controller recording")."""


# ------------------------------------------------------------------ values


def encode_data(data: bytes) -> str | dict[str, str]:
    """Znode data as text when it is UTF-8 (it is JSON), else ``{"b64": ...}``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


def decode_data(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and isinstance(value.get("b64"), str):
        return base64.b64decode(value["b64"])
    raise ValueError(f"not recorded znode data: {value!r}")


def _texts(value: Any) -> Any:
    if isinstance(value, bytes):
        return encode_data(value)
    if isinstance(value, dict):
        return {k: _texts(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_texts(v) for v in value]
    return value


def plain(value: Any) -> Any:
    """A value as JSON-able data, byte strings as text (``encode_data``)."""
    return _texts(msgspec.to_builtins(value, builtin_types=(bytes,)))


def _store_error_types() -> dict[str, type[StoreError]]:
    found: dict[str, type[StoreError]] = {}
    pending: list[type[StoreError]] = [StoreError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


_STORE_ERRORS = _store_error_types()


def encode_error(exc: StoreError) -> dict[str, Any]:
    encoded: dict[str, Any] = {"error": type(exc).__name__, "detail": str(exc)}
    if isinstance(exc, TransactionFailedError):
        encoded["results"] = [None if r is None else encode_error(r) for r in exc.results]
    return encoded


def decode_error(value: Mapping[str, Any]) -> StoreError:
    name = value["error"]
    cls = _STORE_ERRORS.get(name)
    if cls is None:
        raise ValueError(f"unknown store error {name!r} in the recording")
    if cls is TransactionFailedError:
        return TransactionFailedError(
            tuple(None if r is None else decode_error(r) for r in value.get("results", ()))
        )
    return cls(value.get("detail", ""))


# ------------------------------------------------------------------ events

_EVENT_TYPES: dict[str, type[ControllerEvent]] = {
    cls.__name__: cls for cls in typing.get_args(ControllerEventUnion)
}


def _is_callable_type(tp: Any) -> bool:
    if typing.get_origin(tp) is collections.abc.Callable:
        return True
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return any(_is_callable_type(arg) for arg in typing.get_args(tp))
    return False


def _callback_fields(cls: type[ControllerEvent]) -> frozenset[str]:
    return frozenset(f.name for f in msgspec.structs.fields(cls) if _is_callable_type(f.type))


_CALLBACKS = {name: _callback_fields(cls) for name, cls in _EVENT_TYPES.items()}


def _mirror(name: str, cls: type[ControllerEvent]) -> type[msgspec.Struct]:
    """A struct of the event's fields without its callbacks (msgspec cannot convert those)."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(cls):
        if f.name in _CALLBACKS[name]:
            continue
        if f.default is not msgspec.NODEFAULT:
            fields.append((f.name, f.type, f.default))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, f.type, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, f.type))
    return msgspec.defstruct(f"{name}Recorded", fields, kw_only=True, forbid_unknown_fields=True)


_MIRRORS = {name: _mirror(name, cls) for name, cls in _EVENT_TYPES.items()}
_FIELD_NAMES = {name: cls.__struct_fields__ for name, cls in _EVENT_TYPES.items()}


def encode_event(event: ControllerEvent) -> dict[str, Any]:
    """The event's class name and fields; a callback field is ``true`` (``null`` if absent)."""
    encoded: dict[str, Any] = {"type": event.name}
    callbacks = _CALLBACKS.get(event.name, frozenset())
    names = _FIELD_NAMES.get(event.name) or type(event).__struct_fields__
    for name in names:
        value = getattr(event, name)
        encoded[name] = value is not None if name in callbacks else plain(value)
    return encoded


def decode_event(
    value: Mapping[str, Any], callback: Callable[[str, str], Callable[..., None]]
) -> ControllerEventUnion:
    """The typed event back; ``callback(event_name, field)`` makes each recorded callback."""
    name = value.get("type")
    if not isinstance(name, str) or name not in _EVENT_TYPES:
        raise ValueError(f"unknown controller event {name!r} in the recording")
    callbacks = _CALLBACKS[name]
    rest = {k: v for k, v in value.items() if k != "type" and k not in callbacks}
    mirror = msgspec.convert(rest, _MIRRORS[name])
    kwargs: dict[str, Any] = {f: getattr(mirror, f) for f in mirror.__struct_fields__}
    for field in callbacks:
        kwargs[field] = callback(name, field) if value.get(field) else None
    return typing.cast(ControllerEventUnion, _EVENT_TYPES[name](**kwargs))


def encode_config(config: Any) -> dict[str, Any]:
    """A ``ControllerConfig`` (a dataclass) as plain data."""
    return dict(dataclasses.asdict(config))


# ------------------------------------------------------------------ the store session


class RecordingSession(ForwardingSession):
    """Wraps the controller's session: every call is traced (``controller_store``) with its
    arguments (``path``, and in ``args`` those that differ from the defaults) and its
    outcome: ``result`` (JSON-able) or ``error`` (``encode_error``)."""

    def __init__(self, inner: StoreSession, trace: TraceFn) -> None:
        super().__init__(inner)
        self._trace = trace

    async def _recorded(
        self,
        op: str,
        path: str | None,
        args: dict[str, Any],
        call: Awaitable[T],
        encode: Callable[[T], Any] = lambda _: None,
    ) -> T:
        """Await ``call`` and trace it with its outcome (``encode`` makes its result
        JSON-able); a store error is traced, then raised."""
        try:
            result = await call
        except StoreError as exc:
            self._trace_call(op, path, args, None, encode_error(exc))
            raise
        self._trace_call(op, path, args, encode(result), None)
        return result

    def _trace_call(
        self, op: str, path: str | None, args: dict[str, Any], result: Any, error: Any
    ) -> None:
        self._trace(
            "event",
            STORE,
            op=op,
            path=path,
            args=args,
            session=self.inner.session_id,
            result=result,
            error=error,
        )

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        args: dict[str, Any] = {"data": encode_data(data)}
        if ephemeral:
            args["ephemeral"] = True
        if sequential:
            args["sequential"] = True
        if make_parents:
            args["make_parents"] = True
        call = self.inner.create(
            path, data, ephemeral=ephemeral, sequential=sequential, make_parents=make_parents
        )
        return await self._recorded("create", path, args, call, str)

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        args: dict[str, Any] = {"watch": True} if watch else {}
        return await self._recorded(
            "get", path, args, self.inner.get(path, watch=watch), _encode_read
        )

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        args: dict[str, Any] = {"data": encode_data(data), "version": version}
        return await self._recorded(
            "set", path, args, self.inner.set(path, data, version=version), plain
        )

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        args: dict[str, Any] = {"version": version}
        if recursive:
            args["recursive"] = True
        call = self.inner.delete(path, version=version, recursive=recursive)
        await self._recorded("delete", path, args, call)

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        args: dict[str, Any] = {"watch": True} if watch else {}
        return await self._recorded(
            "exists", path, args, self.inner.exists(path, watch=watch), plain
        )

    async def children(self, path: str, *, watch: bool = False) -> tuple[str, ...]:
        args: dict[str, Any] = {"watch": True} if watch else {}
        return await self._recorded(
            "children", path, args, self.inner.children(path, watch=watch), list
        )

    async def multi(self, ops: Sequence[StoreOp]) -> tuple[OpResult, ...]:
        args = {"ops": [plain(op) for op in ops]}
        return await self._recorded("multi", None, args, self.inner.multi(ops), _encode_results)

    async def multi_each(
        self, batches: Sequence[Sequence[StoreOp]]
    ) -> list[tuple[OpResult, ...] | StoreError]:
        args = {"batches": [[plain(op) for op in ops] for ops in batches]}

        def encode(outcomes: list[tuple[OpResult, ...] | StoreError]) -> list[Any]:
            return [
                encode_error(o) if isinstance(o, StoreError) else {"results": _encode_results(o)}
                for o in outcomes
            ]

        return await self._recorded(
            "multi_each", None, args, self.inner.multi_each(batches), encode
        )

    async def create_each(self, creates: Sequence[tuple[str, bytes]]) -> list[str | StoreError]:
        """One ``create`` after the other, each recorded as a lone one."""
        return await StoreSession.create_each(self, creates)

    async def get_each(
        self, reads: Sequence[tuple[str, bool]]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        args = {"reads": [[path, watch] for path, watch in reads]}

        def encode(outcomes: list[tuple[bytes, Stat] | StoreError]) -> list[Any]:
            return [
                encode_error(o) if isinstance(o, StoreError) else _encode_read(o) for o in outcomes
            ]

        return await self._recorded("get_each", None, args, self.inner.get_each(reads), encode)


def _encode_read(read: tuple[bytes, Stat]) -> dict[str, Any]:
    return {"data": encode_data(read[0]), "stat": plain(read[1])}


def _encode_results(results: Sequence[OpResult]) -> list[Any]:
    return [plain(r) for r in results]


# ------------------------------------------------------------------ decoding store results


def decode_stat(value: Any) -> Stat:
    return msgspec.convert(value, Stat)


def decode_op_results(value: Any) -> tuple[OpResult, ...]:
    return tuple(msgspec.convert(r, OpResult) for r in value)


def decode_result(op: str, value: Any) -> Any:
    """The typed return value of ``op`` from its recorded ``result``."""
    match op:
        case "create":
            return str(value)
        case "get":
            return decode_data(value["data"]), decode_stat(value["stat"])
        case "set":
            return decode_stat(value)
        case "delete":
            return None
        case "exists":
            return None if value is None else decode_stat(value)
        case "children":
            return tuple(str(v) for v in value)
        case "multi":
            return decode_op_results(value)
        case "multi_each":
            return [
                decode_error(o) if "error" in o else decode_op_results(o["results"]) for o in value
            ]
        case "get_each":
            return [
                decode_error(o)
                if "error" in o
                else (decode_data(o["data"]), decode_stat(o["stat"]))
                for o in value
            ]
        case _:
            raise ValueError(f"unknown store operation {op!r} in the recording")
