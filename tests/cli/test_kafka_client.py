"""kemu's Kafka admin client: its frames round-trip through the listener's codec, it
follows the controller through NOT_CONTROLLER, it bounds every call and request in time,
refuses an API the broker does not advertise, and reads ``--command-config`` files.
The brokers here are fakes behind a real ``KafkaWireServer``."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from cluster.cli.topics import run_topic_command
from cluster.kafka.client import (
    AdminClientConfig,
    ClientConfigError,
    KafkaAdminClient,
    KafkaTimeoutError,
    UnsupportedVersionError,
    api_error,
    java_exception,
    load_properties,
    produce_exception,
)
from cluster.kafka.listener import (
    KafkaRequest,
    KafkaWireServer,
    api_key_of,
    build_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_data,
)
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    BrokerEndpoint,
    ConfigResource,
    CreatableTopic,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreatePartitionsTopic,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicsRequestData,
    DescribeConfigsRequestData,
    KafkaApiRequestData,
    KafkaApiResponseData,
    MetadataRequestData,
    MetadataResponseData,
    TopicErrorResult,
    TopicMetadata,
)
from tests.support.hosting import hosted_fixture
from tests.support.zookeeper import free_port

FAST = AdminClientConfig(request_timeout_ms=300, default_api_timeout_ms=1500, retry_backoff_ms=20)


@dataclass
class FakeCluster:
    """Two fake brokers sharing one view: who they say the controller is, who it is."""

    ports: dict[int, int] = field(default_factory=dict)
    reported_controller: int = 0
    controller: int = 1
    received: list[tuple[int, str]] = field(default_factory=list)
    hang_on: set[str] = field(default_factory=set)
    topics: tuple[str, ...] = ()

    def metadata(self) -> MetadataResponseData:
        return MetadataResponseData(
            brokers=tuple(
                BrokerEndpoint(broker_id=BrokerId(b), host="127.0.0.1", port=p)
                for b, p in sorted(self.ports.items())
            ),
            cluster_id="fake",
            controller_id=BrokerId(self.reported_controller),
            topics=tuple(TopicMetadata(name=TopicName(t)) for t in self.topics),
        )


class FakeBroker:
    """Answers Metadata, CreateTopics and CreatePartitions (at the versions of ``apis``)."""

    def __init__(
        self,
        broker_id: int,
        cluster: FakeCluster,
        apis: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.cluster = cluster
        self._apis = apis or {3: (0, 9), 19: (0, 6), 37: (0, 3)}

    @property
    def supported(self) -> Mapping[int, tuple[int, int]]:
        return self._apis

    async def handle(self, request: KafkaRequest) -> Any:
        data = request_data(request)
        self.cluster.received.append((self.broker_id, type(data).__name__))
        if type(data).__name__ in self.cluster.hang_on:
            await anyio.sleep_forever()
        if isinstance(data, MetadataRequestData):
            return self.cluster.metadata()
        if isinstance(data, CreateTopicsRequestData):
            if self.broker_id != self.cluster.controller:
                self.cluster.reported_controller = self.cluster.controller  # it learns
                code = ErrorCode.NOT_CONTROLLER
            else:
                code = ErrorCode.NONE
            return CreateTopicsResponseData(
                topics=tuple(CreateTopicResult(name=t.name, error_code=code) for t in data.topics)
            )
        if isinstance(data, CreatePartitionsRequestData):
            return CreatePartitionsResponseData(
                results=tuple(
                    TopicErrorResult(name=t.name, error_code=ErrorCode.INVALID_PARTITIONS)
                    for t in data.topics
                )
            )
        return None


@hosted_fixture()
async def fake() -> AsyncIterator[FakeCluster]:
    cluster = FakeCluster()
    async with anyio.create_task_group() as tg:
        for broker_id in (0, 1):
            server = KafkaWireServer(FakeBroker(broker_id, cluster), node=f"fake-{broker_id}")
            cluster.ports[broker_id] = await tg.start(server.serve)
        yield cluster
        tg.cancel_scope.cancel()


def _bootstrap(fake: FakeCluster, broker: int = 0) -> str:
    return f"127.0.0.1:{fake.ports[broker]}"


@pytest.mark.asyncio
async def test_admin_requests_follow_the_controller_through_not_controller(
    fake: FakeCluster,
) -> None:
    """CreateTopics goes to the controller Metadata names; NOT_CONTROLLER makes the client
    refresh its metadata and retry at the new controller, which answers."""
    async with KafkaAdminClient(_bootstrap(fake), FAST) as client:
        (result,) = await client.create_topics(
            [CreatableTopic(name=TopicName("t"), num_partitions=1, replication_factor=1)]
        )
    assert result.error_code is ErrorCode.NONE
    creates = [b for b, kind in fake.received if kind == "CreateTopicsRequestData"]
    assert creates == [0, 1]


@pytest.mark.asyncio
async def test_a_silent_broker_times_out_each_request_and_the_call(fake: FakeCluster) -> None:
    """A request unanswered within request.timeout.ms is retried until the call's
    default.api.timeout.ms passes, then the call fails with a timeout."""
    fake.hang_on.add("CreateTopicsRequestData")
    fake.reported_controller = 1
    async with KafkaAdminClient(_bootstrap(fake), FAST) as client:
        with pytest.raises(KafkaTimeoutError, match=r"^Call\(callName=createTopics\) timed out"):
            await client.create_topics(
                [CreatableTopic(name=TopicName("t"), num_partitions=1, replication_factor=1)]
            )
    assert len([k for _, k in fake.received if k == "CreateTopicsRequestData"]) >= 2


@pytest.mark.asyncio
async def test_nobody_listening_is_a_node_assignment_timeout() -> None:
    """With no broker reachable the call fails once its deadline passes, as Kafka's."""
    config = AdminClientConfig(default_api_timeout_ms=300, retry_backoff_ms=20)
    async with KafkaAdminClient(f"127.0.0.1:{free_port()}", config) as client:
        with anyio.fail_after(5):
            with pytest.raises(
                KafkaTimeoutError,
                match=r"^Timed out waiting for a node assignment\. Call: listTopics$",
            ):
                await client.list_topics(include_internal=True)


@pytest.mark.asyncio
async def test_an_api_the_broker_does_not_advertise_is_refused() -> None:
    """A broker that does not advertise CreateTopics is refused before anything is sent,
    with NodeApiVersions' message, also through the CLI."""
    cluster = FakeCluster(reported_controller=0, controller=0)
    broker = FakeBroker(0, cluster, apis={3: (0, 9)})
    async with anyio.create_task_group() as tg:
        cluster.ports[0] = await tg.start(KafkaWireServer(broker, node="fake-new").serve)
        message = "The broker does not support CREATE_TOPICS"
        async with KafkaAdminClient(_bootstrap(cluster), FAST) as client:
            with pytest.raises(UnsupportedVersionError, match=re.escape(message)):
                await client.create_topics(
                    [CreatableTopic(name=TopicName("t"), num_partitions=1, replication_factor=1)]
                )
        out, err = io.StringIO(), io.StringIO()
        rc = await run_topic_command(
            ["--create", "--topic", "t", "--bootstrap-server", _bootstrap(cluster)],
            out=out,
            err=err,
        )
        assert (rc, out.getvalue(), err.getvalue()) == (
            1,
            f"Error while executing topic command : {message}\n",
            "",
        )
        assert "CreateTopicsRequestData" not in {kind for _, kind in cluster.received}
        tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_broker_errors_without_a_message_get_kafkas_default_text(fake: FakeCluster) -> None:
    """An error answered without a message reads as Kafka's Errors default message."""
    fake.reported_controller = 1
    async with KafkaAdminClient(_bootstrap(fake), FAST) as client:
        (result,) = await client.create_partitions(
            [CreatePartitionsTopic(name=TopicName("t"), count=3)]
        )
    error = api_error(result.error_code, result.error_message)
    assert isinstance(error, KafkaApiError)
    assert str(error) == "Number of partitions is below 1."


@pytest.mark.asyncio
async def test_command_config_is_read_and_honoured(tmp_path: Path) -> None:
    """--command-config: unknown client properties are accepted, request and API timeouts
    honoured, so an unreachable bootstrap fails fast with Kafka's timeout message."""
    props = tmp_path / "client.properties"
    props.write_text(
        "# a comment\n"
        "client.id = kemu-test\n"
        "security.protocol:PLAINTEXT\n"
        "request.timeout.ms=200\n"
        "default.api.timeout.ms \\\n"
        "   = 300\n"
    )
    assert load_properties(props) == {
        "client.id": "kemu-test",
        "security.protocol": "PLAINTEXT",
        "request.timeout.ms": "200",
        "default.api.timeout.ms": "300",
    }
    config = AdminClientConfig.from_properties(load_properties(props))
    assert (config.client_id, config.request_timeout_ms, config.default_api_timeout_ms) == (
        "kemu-test",
        200,
        300,
    )
    out, err = io.StringIO(), io.StringIO()
    argv = ["--list", "--bootstrap-server", f"127.0.0.1:{free_port()}"]
    with anyio.fail_after(5):
        rc = await run_topic_command([*argv, "--command-config", str(props)], out=out, err=err)
    assert (rc, out.getvalue(), err.getvalue()) == (
        1,
        "Error while executing topic command : Timed out waiting for a node assignment."
        " Call: listTopics\n",
        "",
    )
    with pytest.raises(ClientConfigError, match=r"^Invalid value x for configuration request"):
        AdminClientConfig.from_properties({"request.timeout.ms": "x"})
    missing = await run_topic_command(
        [*argv, "--command-config", str(tmp_path / "nope")], out=out, err=err
    )
    assert missing == 1
    assert err.getvalue().endswith("(No such file or directory)\n")


REQUESTS: list[tuple[KafkaApiRequestData, KafkaApiResponseData]] = [
    (
        MetadataRequestData(topics=(TopicName("a"),)),
        MetadataResponseData(
            brokers=(BrokerEndpoint(broker_id=BrokerId(1), host="h", port=9, rack="r"),),
            cluster_id="c",
            controller_id=BrokerId(1),
            topics=(TopicMetadata(name=TopicName("a"), is_internal=True),),
        ),
    ),
    (
        CreateTopicsRequestData(
            topics=(CreatableTopic(name=TopicName("t"), num_partitions=2, replication_factor=1),),
            timeout_ms=100,
        ),
        CreateTopicsResponseData(
            topics=(
                CreateTopicResult(
                    name=TopicName("t"),
                    error_code=ErrorCode.TOPIC_ALREADY_EXISTS,
                    error_message="m",
                ),
            )
        ),
    ),
    (
        CreatePartitionsRequestData(
            topics=(
                CreatePartitionsTopic(name=TopicName("t"), count=3, assignments=((BrokerId(1),),)),
            ),
            timeout_ms=100,
        ),
        CreatePartitionsResponseData(results=(TopicErrorResult(name=TopicName("t")),)),
    ),
    (
        DescribeConfigsRequestData(resources=(ConfigResource(resource_type=2, resource_name="t"),)),
        None,  # type: ignore[list-item]
    ),
    (DeleteTopicsRequestData(topics=(TopicName("t"),), timeout_ms=5), None),  # type: ignore[list-item]
]


@pytest.mark.parametrize("version_pick", ["oldest", "newest"])
@pytest.mark.parametrize(("request_value", "response_value"), REQUESTS)
def test_client_frames_round_trip_through_the_listeners_codec(
    request_value: KafkaApiRequestData,
    response_value: KafkaApiResponseData | None,
    version_pick: str,
) -> None:
    """What the client encodes the listener decodes to the same values, and the answers the
    listener encodes the client decodes back (at the newest version: all of them)."""
    key = int(api_key_of(request_value))
    advertised = {3: (1, 9), 19: (1, 6), 20: (0, 5), 32: (1, 3), 37: (0, 3)}
    low, high = advertised[key]
    version = low if version_pick == "oldest" else high
    frame = encode_request(request_value, api_version=version, correlation_id=5, client_id="c")
    decoded = decode_request(frame[4:], advertised)
    assert (decoded.correlation_id, decoded.client_id) == (5, "c")
    assert request_data(decoded) == request_value
    if response_value is None or version_pick == "oldest":
        return
    answer = encode_response(decoded, build_response(decoded, response_value))
    correlation_id, back = decode_response(key, version, answer[4:])
    assert correlation_id == 5
    assert back == response_value


def test_bootstrap_servers_are_validated() -> None:
    """Bootstrap servers are HOST:PORT lists; anything else is Kafka's ConfigException."""
    with pytest.raises(ClientConfigError, match=re.escape("Invalid url in bootstrap.servers: x")):
        KafkaAdminClient("x")
    with pytest.raises(ClientConfigError, match="No resolvable bootstrap urls"):
        KafkaAdminClient(" , ")


def test_the_tools_name_each_errors_java_exception_from_one_table() -> None:
    """An error code prints as the class ``Errors.exception`` makes of it (with the
    broker's message, else the error's own), ``InvalidRecordException`` outside
    ``errors`` as in 2.7."""
    assert java_exception(ErrorCode.NOT_ENOUGH_REPLICAS, None) == (
        "org.apache.kafka.common.errors.NotEnoughReplicasException: Messages are rejected "
        "since there are fewer in-sync replicas than required."
    )
    assert java_exception(ErrorCode.NOT_CONTROLLER, "x") == (
        "org.apache.kafka.common.errors.NotControllerException: x"
    )
    assert produce_exception(ErrorCode.INVALID_RECORD, "bad") == (
        "org.apache.kafka.common.InvalidRecordException: bad"
    )
