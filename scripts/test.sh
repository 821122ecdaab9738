#!/usr/bin/env bash
# Installs everything kemu's tests need on a fresh machine, then runs every check:
# ruff (lint + format), mypy --strict, the import-layering contracts and the whole pytest
# suite (including the store contract suite against a real ZooKeeper the tests start),
# then the chaos campaigns (scripts/chaos.sh: every scenario x 50 seeds, deterministic;
# --real: scenarios/real on processes and a real ZooKeeper, SIGKILL, 3 seeds, a job per CPU).
# Usage: scripts/test.sh [pytest args...]
# The inner loop alone: .venv/bin/pytest -m "not slow" (the markers: tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_apt_packages zookeeper kcat chromium  # chromium: tests/chaos/test_report.py opens report.html
ensure_venv
pip_install -e ".[test,spark]"  # tests/spark need pyspark (Java comes with zookeeper)

export PYTHONHASHSEED=0  # determinism tests compare traces byte for byte across runs
step "ruff check";         "$VENV/bin/ruff" check .
step "ruff format";        "$VENV/bin/ruff" format --check .
step "mypy --strict";      "$VENV/bin/mypy"
step "import layering";    "$VENV/bin/lint-imports"
step "pytest";             "$VENV/bin/python" -m pytest --durations=30 "$@"  # the slowest 30 in the log: the suite must stay under 30 minutes with the campaigns
step "chaos campaign";    bash scripts/chaos.sh
step "chaos campaign, real mode"; bash scripts/chaos.sh --real
