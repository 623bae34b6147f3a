"""The ``biaslab`` console script and ``python -m biaslab``: the start-up of
:mod:`biaslab.runtime.startup` (numeric pins, offline Hub, workspace guard), then the command
line of :mod:`biaslab.cli`, imported after it so that its NumPy and torch load pinned."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run :func:`biaslab.runtime.startup.start`, then :func:`biaslab.cli.main`; returns the
    exit code."""
    from biaslab.runtime import startup
    startup.start()
    from biaslab.cli import main as cli_main
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
