"""Identifier types. Distinct names for distinct ids, so that mypy catches swaps."""

from __future__ import annotations

from typing import NewType

BrokerId = NewType("BrokerId", int)
TopicName = NewType("TopicName", str)
ControllerEpoch = NewType("ControllerEpoch", int)
BrokerEpoch = NewType("BrokerEpoch", int)
LeaderEpoch = NewType("LeaderEpoch", int)
NodeId = NewType("NodeId", str)
CorrelationId = NewType("CorrelationId", int)
