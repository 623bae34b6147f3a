#!/usr/bin/env bash
# Does ./.venv belong to this checkout? Exit 0 (silent) when it does or when there is none;
# print why and exit 1 when it belongs to another one: a .venv copied or moved from another
# checkout still runs that checkout's biaslab (its editable install), and its scripts'
# shebangs name the old path. scripts/setup.sh re-creates such a venv.
[ -x .venv/bin/python ] || exit 0
# -I: not from the current directory (which is this checkout), as the venv's scripts run it
here=$(.venv/bin/python -I -c 'import biaslab, os; print(os.path.dirname(os.path.dirname(os.path.realpath(biaslab.__file__))))' 2>/dev/null || true)
shebang=$(head -1 .venv/bin/pip 2>/dev/null | cut -c3-)
if [ "$here" != "$(pwd -P)" ]; then
  echo ".venv belongs to another checkout (its biaslab: ${here:-not importable})"
  exit 1
fi
if [ "$(realpath -m "$shebang" 2>/dev/null)" != "$(realpath -m "$PWD/.venv/bin/python")" ]; then
  echo ".venv was made at another path (its pip runs ${shebang:-nothing})"
  exit 1
fi
