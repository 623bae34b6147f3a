#!/usr/bin/env bash
# Idempotent set-up: system packages (Java for METEOR, WordNet for NLTK), the .venv with the
# pinned requirements, the biaslab package, and NLTK's WordNet corpus. Safe to run repeatedly:
# each step is skipped when already done. Sourced by scripts/repro.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
[ -f /usr/share/wordnet/data.noun ] || need_apt+=(wordnet-base)
[ -f /usr/share/wordnet/index.sense ] || need_apt+=(wordnet-sense-index)
command -v git >/dev/null 2>&1 || need_apt+=(git)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
# a .venv copied or moved from another checkout still runs that checkout's biaslab (its
# editable install) and its scripts' shebangs name the old path: start it afresh
if ! why=$(bash scripts/venv_check.sh); then
  echo "setup: $why; re-creating it"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing requirements into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt -c requirements.lock
  .venv/bin/pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi

# Portable numerics (biaslab/runtime/numerics.py): every Python of this venv (dvc, each stage,
# pytest, forked and Ray workers) pins the CPU float paths at start-up, before NumPy or torch
# load, so the committed dvc.lock is reproduced on any x86-64 machine whatever the shell sets.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pth_line='import biaslab.runtime.startup as _biaslab; _biaslab.start()  # biaslab/runtime/startup.py: numeric pins, offline Hub, workspace guard'
if [ "$(cat "$site/biaslab_numerics.pth" 2>/dev/null)" != "$pth_line" ]; then
  echo "$pth_line" > "$site/biaslab_numerics.pth"
fi

# NLTK reads WordNet from <venv>/nltk_data/corpora/wordnet: link Debian's WordNet 3.0 files and
# generate the `lexnames` file NLTK needs (Debian ships it only as the lexnames(5WN) man page).
wn=.venv/nltk_data/corpora/wordnet
if [ ! -f "$wn/lexnames" ]; then
  mkdir -p "$wn"
  # copies, not links: NLTK rejects paths that resolve outside its data root
  find /usr/share/wordnet -maxdepth 1 -type f -exec cp -f {} "$wn/" \;
  .venv/bin/python scripts/wordnet_lexnames.py /usr/share/man/man5/lexnames.5WN.gz > "$wn/lexnames.tmp"
  mv "$wn/lexnames.tmp" "$wn/lexnames"
fi
export PATH="$PWD/.venv/bin:$PATH"
