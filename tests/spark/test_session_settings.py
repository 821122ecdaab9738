"""The settings kemu gives a Spark session it starts: a local master gets four shuffle
partitions a core, a cluster master Spark's own default, and the caller's settings win."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark.session import local_cores, session_settings

SCRATCH = Path("/scratch")


@pytest.mark.parametrize(
    ("master", "cores"),
    [
        ("local", 1),
        ("local[1]", 1),
        ("local[3]", 3),
        ("local[2,4]", 2),
        ("local[*]", os.cpu_count() or 1),
        ("local[*,3]", os.cpu_count() or 1),
        ("local[0]", None),
        ("local[x]", None),
        ("local-cluster[2,1,1024]", None),
        ("spark://host:7077", None),
        ("yarn", None),
        (None, None),
    ],
)
def test_the_cores_of_a_local_master(master: str | None, cores: int | None) -> None:
    assert local_cores(master) == cores


def test_a_local_session_gets_four_shuffle_partitions_a_core() -> None:
    settings = session_settings("local[2]", SCRATCH, loopback=True)
    assert settings["spark.sql.shuffle.partitions"] == "8"
    assert settings["spark.local.dir"] == str(SCRATCH)
    assert settings["spark.driver.host"] == "127.0.0.1"


def test_a_cluster_session_keeps_sparks_shuffle_partitions() -> None:
    settings = session_settings("spark://host:7077", SCRATCH, loopback=False)
    assert "spark.sql.shuffle.partitions" not in settings
    assert "spark.driver.host" not in settings


def test_under_spark_submit_the_master_is_not_ours_to_size() -> None:
    # spark-submit decides the master (loopback is off then): no partition count is set.
    settings = session_settings("local[2]", SCRATCH, loopback=False)
    assert "spark.sql.shuffle.partitions" not in settings


def test_the_callers_settings_win() -> None:
    config = {"spark.sql.shuffle.partitions": "200", "spark.ui.enabled": "true"}
    settings = session_settings("local[2]", SCRATCH, config, loopback=True)
    assert settings["spark.sql.shuffle.partitions"] == "200"
    assert settings["spark.ui.enabled"] == "true"
