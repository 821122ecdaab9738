#!/usr/bin/env bash
# README command 1: install kemu into .venv and run the live demo.
# Usage: scripts/demo.sh [kemu demo options, e.g. --virtual --seed 7]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_venv
pip_install -e .
exec "$VENV/bin/kemu" demo "$@"
