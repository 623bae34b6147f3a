#!/usr/bin/env bash
# Set up (idempotent) and run the test suite: `bash scripts/test.sh [pytest args]`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
python -m pytest -q --durations=15 "$@"
