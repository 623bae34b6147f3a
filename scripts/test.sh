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
# one pytest worker per core (pytest-xdist), a test module per worker at a time (its module
# fixtures, e.g. a whole `dvc repro`, run once): every stage pins its numerics to one thread
# (biaslab/runtime/numerics.py), so one process uses one core and a serial run leaves the other
# idle. The slowest modules go first (tests/conftest.py). BIASLAB_TEST_WORKERS=0: serial.
workers=${BIASLAB_TEST_WORKERS:-$(nproc)}
python -m pytest -q --durations=15 -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
