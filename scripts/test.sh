#!/usr/bin/env bash
# Set up (idempotent) and run the test suite: `bash scripts/test.sh [pytest args]`.
# The suite runs on BIASLAB_TEST_WORKERS pytest-xdist workers (default 2, this machine's cores),
# one test file per worker (module fixtures such as the end-to-end `dvc repro` run once), the
# longest files first (tests/conftest.py); `bash scripts/test.sh -n 0` runs it in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# Debian's chromium: tests/test_html_report.py reads the report page back in a real headless
# browser (broken glyphs, missing figures); the pipeline itself needs no browser
if ! command -v chromium >/dev/null 2>&1; then
  echo "test: installing Debian's chromium (the report page's browser test)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium fonts-dejavu-core >/dev/null
fi
# the test-only extras of pyproject.toml, once per pin: Ray for tests/test_executor.py
# (repro.sh does not need it) and pytest-xdist
extras=$(grep -o '"\(ray\|pytest-xdist\|execnet\)==[^"]*"' pyproject.toml | tr -d '"' | xargs)
stamp=.venv/.test-extras
if [ "$(cat "$stamp" 2>/dev/null)" != "$extras" ]; then
  echo "test: installing the test extras ($extras)"
  # shellcheck disable=SC2086
  .venv/bin/pip install -q $extras -c requirements.lock
  echo "$extras" > "$stamp"
fi
# Two workers keep both cores busy, so a stage with 2 torch threads (LIBRA's) shares its cores
# with the other worker: OpenMP threads that spin at each barrier then steal the core their
# partner needs (T5 fine-tuning beside one busy core: 181 s spinning, 96 s sleeping, 70 s on an
# idle machine; the same bytes: benchmarks/results/libra_threads.json). The suite sleeps;
# `dvc repro` on an idle machine keeps OpenMP's default.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
python -m pytest -q -n "${BIASLAB_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
  --durations=15 "$@"
