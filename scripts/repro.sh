#!/usr/bin/env bash
# Set up (idempotent) and run the pipeline: `bash scripts/repro.sh [dvc repro args]`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
dvc repro "$@"
