#!/usr/bin/env bash
# Set up (idempotent) and run the test suite: `bash scripts/test.sh [pytest args]`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# the optional Ray extra for tests/test_executor.py (repro.sh does not need it), once per pin
ray_pin=$(grep -o '"ray==[^"]*"' pyproject.toml | tr -d '"')
ray_stamp=.venv/.ray-extra
if [ "$(cat "$ray_stamp" 2>/dev/null)" != "$ray_pin" ]; then
  echo "test: installing the ray extra ($ray_pin)"
  .venv/bin/pip install -q "$ray_pin" -c requirements.lock
  echo "$ray_pin" > "$ray_stamp"
fi
python -m pytest -q --durations=15 "$@"
