"""One run at a time in a workspace (issue 26 item 2).

DVC lets a second ``dvc exp run`` start in a workspace whose experiment is still running: it
stashes the workspace, rewrites ``params.yaml`` (Hydra composition) and only then finds a busy
output. Measured before this guard: both runs died ("Stash apply resulted in merge
conflicts"), or the first one's experiment was lost and ``dvc.lock`` recorded a param value
beside an output made with another. DVC's own locks cannot stop it: the repository lock is
released while a stage's command runs.

:func:`check_command` runs at the start of every Python process of the project's venv (the
``biaslab_numerics.pth`` start-up hook imports :mod:`biaslab`, which calls it), so it acts
before DVC writes anything. For a ``dvc`` process it reads the command:

* a *workspace run* (``dvc exp run`` without ``--queue`` / ``--temp`` / ``--run-all`` /
  ``--dry``, and ``dvc repro`` without ``--dry``) claims ``.dvc/tmp/biaslab-workspace-run.json``
  (created exclusively, holding its pid; removed at exit);
* any ``dvc exp run`` or ``dvc repro`` is refused (exit 2, nothing written) while another live
  process holds the claim, with a message that points to ``--queue``: queued experiments run
  in their own directories (``dvc queue start``), never in the workspace.

Every other process (stages, tests, other dvc commands) is untouched. A claim left by a killed
process (its pid is gone) is taken over.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path

CLAIM = Path(".dvc") / "tmp" / "biaslab-workspace-run.json"
ISOLATED_FLAGS = ("--queue", "--temp", "--run-all", "--dry")


def _repo_root(start: Path) -> Path | None:
    for d in (start, *start.parents):
        if (d / ".dvc").is_dir():
            return d
    return None


def classify(argv: list[str]) -> str | None:
    """What a ``dvc`` command line does to the workspace: ``"workspace"`` (it runs stages in the
    workspace: ``exp run`` without an isolating flag, ``repro`` without ``--dry``),
    ``"isolated"`` (``exp run`` with ``--queue`` / ``--temp`` / ``--run-all`` / ``--dry``: it
    still rewrites params.yaml while it stashes, so it must not start beside a workspace run),
    ``None`` (anything else, or not ``dvc``)."""
    if not argv or Path(argv[0]).name not in ("dvc", "dvc.exe"):
        return None
    words = [a for a in argv[1:] if not a.startswith("-")]
    flags = set(a.split("=")[0] for a in argv[1:] if a.startswith("-"))
    if words[:2] in (["exp", "run"], ["experiments", "run"]):
        return "isolated" if flags & set(ISOLATED_FLAGS) else "workspace"
    if words[:1] == ["repro"]:
        return None if "--dry" in flags else "workspace"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder(root: Path) -> dict | None:
    """The live workspace run of the repository at ``root`` (``{"pid", "command", "started"}``),
    or None (no claim, an unreadable one, or its process is gone)."""
    try:
        info = json.loads((root / CLAIM).read_text())
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if pid != os.getpid() and _alive(pid) else None


class Refused(Exception):
    """A ``dvc`` command that must not start beside the running workspace run."""


def _refusal(info: dict, claim: Path) -> str:
    return (f"biaslab: refused: this workspace is running `{info.get('command', 'dvc')}` "
            f"(pid {info['pid']}, since {info.get('started', '?')}). A second run would "
            f"rewrite params.yaml and dvc.lock under it. Wait for it to finish, or run "
            f"experiments isolated: `dvc exp run --queue -S ...` for each, then "
            f"`dvc queue start` (README, \"Experiments\"). Nothing was written. If no such "
            f"process runs, remove {claim}.")


def claim_or_refuse(argv: list[str], cwd: Path | None = None) -> Path | None:
    """Apply the rule of the module docstring to ``argv`` run in ``cwd``.

    Returns: the claim file this process now holds (a workspace run), else None.

    Raises:
        Refused: another live process holds the workspace (message: who, and what to do).
    """
    kind = classify(argv)
    if kind is None:
        return None
    root = _repo_root((cwd or Path.cwd()).resolve())
    if root is None:
        return None
    claim = root / CLAIM
    info = holder(root)
    if info is not None:
        raise Refused(_refusal(info, claim))
    if kind != "workspace":
        return None
    claim.parent.mkdir(parents=True, exist_ok=True)
    record = json.dumps({"pid": os.getpid(), "command": " ".join(["dvc", *argv[1:]])[:200],
                         "started": time.strftime("%Y-%m-%d %H:%M:%S")})
    for _ in range(2):
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            info = holder(root)
            if info is not None:            # lost the race to a live run
                raise Refused(_refusal(info, claim)) from None
            try:                            # a dead process's claim: take it over
                claim.unlink()
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as f:
            f.write(record)
        return claim
    raise Refused(_refusal(holder(root) or {"pid": "?"}, claim))


def release(claim: Path) -> None:
    """Remove ``claim`` if this process still holds it."""
    try:
        if int(json.loads(claim.read_text())["pid"]) == os.getpid():
            claim.unlink()
    except (OSError, ValueError, KeyError, TypeError):
        pass


def check_command() -> None:
    """Start-up hook (``biaslab/__init__``): claim the workspace for a workspace run of
    ``dvc``, or print the refusal and end the process with exit status 2 (``os._exit``: this
    runs inside the interpreter's start-up, where ``SystemExit`` is not handled cleanly). A
    no-op for every other process; an OS error of the check itself is ignored (a broken check
    must not break the interpreter). ``BIASLAB_NO_GUARD=1`` turns it off."""
    argv = list(getattr(sys, "argv", None) or [])
    if classify(argv) is None or os.environ.get("BIASLAB_NO_GUARD"):
        return
    try:
        claim = claim_or_refuse(argv)
    except Refused as e:
        print(str(e), file=sys.stderr, flush=True)
        os._exit(2)
    except OSError:
        return
    if claim is not None:
        atexit.register(release, claim)
