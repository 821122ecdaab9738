"""Markers of the chaos tests that are slow or spawn processes, by test (the modules mix
them with quick checks of the same feature): the real-mode and SIGSTOP runs start kemu
processes and a real ZooKeeper; the hash-seed check runs scenarios in other
interpreters."""

from __future__ import annotations

import pytest

SLOW_TESTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("test_real_mode.py", "test_a_real_session_expiry_of_the_controller_on_processes"): (
        "processes",
    ),
    ("test_real_mode.py", "test_a_sigkilled_follower_on_processes_comes_back"): ("processes",),
    ("test_real_mode.py", "test_a_sigkilled_leader_under_acks_all_loses_nothing"): ("processes",),
    (
        "test_pause_fault.py",
        "test_a_sigstopped_controller_process_is_expired_by_zookeeper_and_comes_back",
    ): ("processes",),
    # one run of a scenario, then headless Chromium opening its report (a few seconds)
    ("test_report.py", "test_the_page_is_ready_with_one_lane_per_node_and_nothing_overflowing"): (),
    ("test_report.py", "test_stop_replica_arrows_go_from_each_controller_to_the_replicas"): (),
    ("test_report.py", "test_the_kill_the_fault_and_the_controller_change_are_drawn"): (),
    ("test_report.py", "test_the_time_series_are_drawn_with_the_fault_shaded"): (),
    ("test_report.py", "test_hover_zoom_and_the_topic_filter_work_in_the_browser"): (),
    ("test_report.py", "test_nothing_overflows_a_narrow_window"): (),
    ("test_report.py", "test_a_problem_s_event_link_brings_the_diagram_to_it"): (),
    ("test_scenarios.py", "test_the_trace_does_not_depend_on_the_process_or_its_hash_seed"): (
        "processes",
    ),
}
"""(module, test function) -> its markers besides ``slow``."""


def pytest_itemcollected(item: pytest.Item) -> None:
    function = getattr(item, "originalname", item.name)
    marks = SLOW_TESTS.get((item.path.name, function))
    if marks is None:
        return
    for name in ("slow", *marks):
        item.add_marker(getattr(pytest.mark, name))
