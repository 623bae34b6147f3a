"""One run at a time in a workspace, and nothing that changes the workspace beside it.

DVC lets a second ``dvc exp run`` start in a workspace whose experiment is still running: it
stashes the workspace, rewrites ``params.yaml`` (Hydra composition) and only then finds a busy
output. Measured before this guard: both runs died ("Stash apply resulted in merge
conflicts"), or the first one's experiment was lost and ``dvc.lock`` recorded a param value
beside an output made with another. DVC's own locks cannot stop it: the repository lock is
released while a stage's command runs.

:func:`check_command` runs at the start of every Python process of the project's venv (the
``biaslab_numerics.pth`` start-up hook runs :func:`biaslab.runtime.startup.start`, which
calls it), so it acts
before DVC writes anything. DVC is recognised however it is started: the ``dvc`` script,
``python -m dvc``, and with ``--cd <dir>`` (``-C <dir>``) before the command. For a ``dvc``
process it reads the command:

* a *workspace run* (``dvc exp run`` without ``--queue`` / ``--temp`` / ``--run-all`` /
  ``--dry``, and ``dvc repro`` without ``--dry``) claims ``.dvc/tmp/biaslab-workspace-run.json``
  (created exclusively, holding its pid and start time; removed at exit);
* any ``dvc exp run`` or ``dvc repro``, and every command that rewrites the workspace
  (``dvc exp apply``, ``dvc checkout``, ``dvc pull``), is refused (exit 2, nothing written)
  while the run holds the claim, with a message that points to ``--queue``: queued
  experiments run in their own directories (``dvc queue start``), never in the workspace.

The claim holds while any process of the run lives, not only ``dvc``: a stage process (any
Python process started with the claimant's ``BIASLAB_WORKSPACE_RUN`` in its environment)
registers its pid beside the claim, so a ``kill -9`` of ``dvc`` alone, which leaves its stage
running, does not free the workspace for a second run that would write the same outputs.
A claim whose processes are all gone (checked by pid and start time) is taken over.

A run whose ``data.root`` (after the ``-S`` overrides) is not a directory is refused before
DVC starts, for every ``data.source`` but ``synthetic`` (whose root stage synthesize writes):
DVC would otherwise remove the first stages' outputs, re-run them, and only then fail on the
missing dep with a bare ``[Errno 2]``.

Two warnings, without refusing: ``BIASLAB_NUMERICS`` in the environment of a run (the stages
take the mode from params ``numerics.*``, so it is ignored), and, for ``dvc exp run -S``, the
values of ``params.yaml`` that DVC's Hydra composition is about to replace (hand edits, or an
earlier ``-S`` in the workspace), named before they are lost.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import sys
import time
from pathlib import Path

CLAIM = Path(".dvc") / "tmp" / "biaslab-workspace-run.json"
#: the directory beside the claim where the run's stage processes register (one file per pid)
PIDS = Path(".dvc") / "tmp" / "biaslab-workspace-run.pids"
#: set by the claimant for the processes it starts: the claim file
ENV = "BIASLAB_WORKSPACE_RUN"
ISOLATED_FLAGS = ("--queue", "--temp", "--run-all", "--dry")
#: commands that rewrite the workspace's files without running stages
CHANGES = (("exp", "apply"), ("experiments", "apply"), ("checkout",), ("pull",))
#: DVC's global options that take a value (they come before the command)
_GLOBAL_VALUE = ("--cd", "-C")


def repo_root(start: Path) -> Path | None:
    """The nearest of ``start`` and its parents that holds a ``.dvc`` directory, or None."""
    for d in (start, *start.parents):
        if (d / ".dvc").is_dir():
            return d
    return None


def dvc_args(argv: list[str], orig_argv: list[str] | None = None) -> list[str] | None:
    """The arguments after ``dvc`` when this process is DVC, else None: ``argv[0]`` is the
    ``dvc`` script, or the interpreter ran ``-m dvc`` (``orig_argv``: during start-up
    ``sys.argv`` of ``python -m dvc exp run`` is ``["-m", "exp", "run"]``)."""
    if argv and Path(argv[0]).name in ("dvc", "dvc.exe"):
        return list(argv[1:])
    o, i = list(orig_argv or []), 1
    while i < len(o):
        a = o[i]
        if a == "-m":
            return list(o[i + 2:]) if o[i + 1:i + 2] in (["dvc"], ["dvc.__main__"]) else None
        if a in ("-mdvc", "-mdvc.__main__"):
            return list(o[i + 1:])
        if a == "-c" or a == "-" or not a.startswith("-"):
            return None                   # a command string, stdin or a script: not DVC
        i += 2 if a in ("-X", "-W") else 1    # the interpreter's options with a value
    return None


def parse(args: list[str]) -> tuple[str | None, list[str], set[str]]:
    """``(cd, command, flags)`` of DVC's arguments: ``--cd`` / ``-C``'s directory (None when
    absent), the command words (``["exp", "run"]``, ``["repro"]``) and the option names
    after them (``{"--queue", "-S"}``)."""
    cd, i = None, 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a in _GLOBAL_VALUE:
            cd = args[i + 1] if i + 1 < len(args) else None
            i += 2
            continue
        if a.startswith("--cd="):
            cd = a.split("=", 1)[1]
        i += 1
    rest = args[i:]
    words = rest[:1]
    if len(rest) > 1 and not rest[1].startswith("-") and rest[0] in ("exp", "experiments"):
        words.append(rest[1])
    flags = {a.split("=")[0] for a in rest if a.startswith("-")}
    return cd, words, flags


def classify(argv: list[str], orig_argv: list[str] | None = None) -> str | None:
    """What a command line does to the workspace: ``"workspace"`` (it runs stages in the
    workspace: ``exp run`` without an isolating flag, ``repro`` without ``--dry``),
    ``"isolated"`` (``exp run`` with ``--queue`` / ``--temp`` / ``--run-all`` / ``--dry``: it
    still rewrites params.yaml while it stashes, so it must not start beside a workspace run),
    ``"changes"`` (``exp apply``, ``checkout``, ``pull``: they rewrite tracked files),
    ``None`` (anything else, or not DVC)."""
    args = dvc_args(argv, orig_argv)
    if args is None:
        return None
    _, words, flags = parse(args)
    if words[:2] in (["exp", "run"], ["experiments", "run"]):
        return "isolated" if flags & set(ISOLATED_FLAGS) else "workspace"
    if words[:1] == ["repro"]:
        return None if "--dry" in flags else "workspace"
    if tuple(words) in CHANGES:
        return "changes"
    return None


def _created(pid: int) -> float | None:
    try:
        import psutil
        return psutil.Process(pid).create_time()
    except Exception:   # no psutil, no such process, no access: liveness by pid only
        return None


def _alive(pid: int, created: float | None = None) -> bool:
    """``pid`` runs, and is the process started at ``created`` (epoch s) when that is known
    (a recycled pid is not the claimant)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if created is None:
        return True
    now = _created(pid)
    return now is None or abs(now - float(created)) < 1.0


def holder(root: Path) -> dict | None:
    """The live workspace run of the repository at ``root`` (``{"pid", "command", "started"}``,
    plus ``"stage_pid"`` when ``dvc`` is gone but a stage process of its run still lives),
    or None (no claim, an unreadable one, or every process of it is gone)."""
    try:
        info = json.loads((root / CLAIM).read_text())
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid():
        return None
    if _alive(pid, info.get("created")):
        return info
    for f in sorted((root / PIDS).glob("*")):
        try:
            spid, created = int(f.name), float(f.read_text() or "nan")
        except (OSError, ValueError):
            continue
        if spid != os.getpid() and _alive(spid, None if created != created else created):
            return {**info, "stage_pid": spid}
    return None


class Refused(Exception):
    """A ``dvc`` command that must not start beside the running workspace run."""


def _refusal(info: dict, claim: Path) -> str:
    if "stage_pid" in info:
        return (f"biaslab: refused: this workspace's run `{info.get('command', 'dvc')}` lost "
                f"its dvc process (pid {info['pid']}), but its stage process (pid "
                f"{info['stage_pid']}) still runs and writes that stage's outputs. Wait for it "
                f"to end, or stop it (`kill {info['stage_pid']}`), then run again. Nothing "
                f"was written.")
    return (f"biaslab: refused: this workspace is running `{info.get('command', 'dvc')}` "
            f"(pid {info['pid']}, since {info.get('started', '?')}). A second run, "
            f"`dvc exp apply` or `dvc checkout` would rewrite params.yaml, dvc.lock or the "
            f"outputs under it. Wait for it to finish, or run experiments isolated: "
            f"`dvc exp run --queue -S ...` for each, then `dvc queue start` (README, "
            f"\"Experiments\"). Nothing was written. If no such process runs, remove {claim}.")


def _clear(root: Path) -> None:
    for f in (root / PIDS).glob("*"):
        try:
            f.unlink()
        except OSError:
            pass


def claim_or_refuse(argv: list[str], cwd: Path | None = None,
                    orig_argv: list[str] | None = None) -> Path | None:
    """Apply the rule of the module docstring to ``argv`` run in ``cwd`` (``--cd`` applied).

    Returns: the claim file this process now holds (a workspace run), else None.

    Raises:
        Refused: another live run holds the workspace (message: who, and what to do).
    """
    kind = classify(argv, orig_argv)
    if kind is None:
        return None
    cd, _, _ = parse(dvc_args(argv, orig_argv) or [])
    here = (cwd or Path.cwd())
    root = repo_root((here / cd if cd else here).resolve())
    if root is None:
        return None
    claim = root / CLAIM
    info = holder(root)
    if info is not None:
        raise Refused(_refusal(info, claim))
    if kind != "workspace":
        return None
    claim.parent.mkdir(parents=True, exist_ok=True)
    record = json.dumps({"pid": os.getpid(), "created": _created(os.getpid()),
                         "command": " ".join(["dvc", *(dvc_args(argv, orig_argv) or [])])[:200],
                         "started": time.strftime("%Y-%m-%d %H:%M:%S")})
    for _ in range(2):
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            info = holder(root)
            if info is not None:            # lost the race to a live run
                raise Refused(_refusal(info, claim)) from None
            try:                            # a dead run's claim: take it over
                claim.unlink()
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as f:
            f.write(record)
        _clear(root)
        (root / PIDS).mkdir(parents=True, exist_ok=True)
        return claim
    raise Refused(_refusal(holder(root) or {"pid": "?"}, claim))


def release(claim: Path) -> None:
    """Remove ``claim`` (and its stage registrations) if this process still holds it."""
    try:
        if int(json.loads(claim.read_text())["pid"]) == os.getpid():
            claim.unlink()
            _clear(claim.parents[2])
    except (OSError, ValueError, KeyError, TypeError):
        pass


def register_stage(claim: Path) -> Path | None:
    """Record this process as part of the run holding ``claim`` (a file named by its pid,
    holding its start time, under :data:`PIDS`); returns it, or None when the run's claim is
    gone. Removed again at exit."""
    pids = claim.parents[2] / PIDS
    if not claim.exists() or not pids.is_dir():
        return None
    f = pids / str(os.getpid())
    created = _created(os.getpid())
    f.write_text("" if created is None else repr(created))
    return f


def _unlink(f: Path) -> None:
    try:
        f.unlink()
    except OSError:
        pass


def _dvc_config(root: Path) -> str:
    text = ""
    for name in ("config", "config.local"):
        try:
            text += (root / ".dvc" / name).read_text() + "\n"
        except OSError:
            pass
    return text


def _hydra(root: Path) -> dict | None:
    """DVC's ``[hydra]`` settings of the repository, when enabled (config dir, name)."""
    sec = re.search(r"^\s*\[\s*hydra\s*\]\s*$(.*?)(?=^\s*\[|\Z)", _dvc_config(root), re.M | re.S)
    if not sec:
        return None
    kv = dict(re.findall(r"^\s*([\w_]+)\s*=\s*(.*?)\s*$", sec.group(1), re.M))
    if kv.get("enabled", "").lower() not in ("true", "1", "yes"):
        return None
    return {"config_dir": kv.get("config_dir", "conf"), "config_name": kv.get("config_name",
                                                                           "config"),
            "plugins_path": kv.get("plugins_path", "")}


def _overrides(args: list[str]) -> list[str] | None:
    """The ``-S`` / ``--set-param`` overrides of ``params.yaml`` in ``dvc exp run``'s arguments
    (another file's ``file:key=value`` left out); None when there is none."""
    out = []
    for i, a in enumerate(args):
        v = None
        if a in ("-S", "--set-param") and i + 1 < len(args):
            v = args[i + 1]
        elif a.startswith("--set-param="):
            v = a.split("=", 1)[1]
        elif a.startswith("-S") and len(a) > 2:
            v = a[2:]
        if v is None:
            continue
        m = re.match(r"^([^=]+?\.(?:yaml|yml|json|toml|py)):(.*)$", v)
        if m and Path(m.group(1)).name != "params.yaml":
            continue
        out.append(m.group(2) if m else v)
    return out or None


def _flat(d, prefix=""):
    if isinstance(d, dict):
        out = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out or {prefix[:-1]: {}}
    return {prefix[:-1]: d}


def _compose(root: Path, hydra: dict, overrides: list[str]) -> dict:
    import tempfile
    import yaml
    from dvc.utils.hydra import compose_and_dump
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "params.yaml"
        compose_and_dump(str(out), str((root / hydra["config_dir"]).resolve()), None,
                         hydra["config_name"], str(root / hydra["plugins_path"]), overrides)
        return yaml.safe_load(out.read_text()) or {}


def run_params(root: Path, overrides: list[str] | None) -> dict | None:
    """The params a run of ``root`` will use: ``params.yaml`` recomposed with ``overrides``
    (``dvc exp run -S``, Hydra on), else ``params.yaml`` as it is; None when unreadable."""
    import yaml
    hydra = _hydra(root)
    try:
        if overrides and hydra is not None:
            return _compose(root, hydra, overrides)
        return yaml.safe_load((root / "params.yaml").read_text()) or {}
    except Exception:     # DVC reports a bad params.yaml or override in its own words
        return None


def data_root_problem(root: Path, params: dict) -> str | None:
    """Why the run cannot read its data (``data.root`` is not a directory, for any
    ``data.source`` but ``synthetic``, whose root stage synthesize writes), or None."""
    data = params.get("data") if isinstance(params, dict) else None
    if not isinstance(data, dict) or data.get("source") in (None, "synthetic"):
        return None
    d = data.get("root")
    if not isinstance(d, str) or not d:
        return f"params data.root is empty (data.source={data.get('source')!r})"
    path = Path(d) if Path(d).is_absolute() else root / d
    if not path.is_dir():
        return (f"params data.root: {path} is not a directory (data.source="
                f"{data.get('source')!r}); put the dataset there or pass -S data.root=<dir>")
    return None


def replaced_params(root: Path, overrides: list[str]) -> dict[str, tuple]:
    """``{dotted key: (params.yaml's value, the value after composition)}``: the values of
    ``root/params.yaml`` that ``dvc exp run -S <overrides>`` will replace and that came from
    neither ``conf/`` nor the overrides (a hand edit, or an earlier ``-S`` in the workspace).
    Empty when Hydra is off in DVC's config or params.yaml is absent."""
    import yaml
    hydra = _hydra(root)
    params = root / "params.yaml"
    if hydra is None or not params.exists():
        return {}
    got = {name: _flat(_compose(root, hydra, ov))
           for name, ov in (("base", []), ("new", overrides))}
    now = _flat(yaml.safe_load(params.read_text()) or {})
    return {k: (v, got["new"].get(k, "(removed)")) for k, v in now.items()
            if v != got["new"].get(k, object()) and v != got["base"].get(k, object())}


def _warn_replaced(root: Path, args: list[str]) -> None:
    overrides = _overrides(args)
    if overrides is None:
        return
    try:
        lost = replaced_params(root, overrides)
    except Exception as e:   # the composition fails: DVC will say why, with its own message
        print(f"biaslab: could not compare params.yaml with conf/: {e}", file=sys.stderr)
        return
    if lost:
        shown = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in list(lost.items())[:8])
        more = f" (and {len(lost) - 8} more)" if len(lost) > 8 else ""
        print(f"biaslab: warning: `dvc exp run -S` recomposes params.yaml from conf/ (Hydra), "
              f"so {len(lost)} value(s) of params.yaml that are not in conf/ are replaced: "
              f"{shown}{more}. To keep one, put it in conf/ or pass it with -S.",
              file=sys.stderr, flush=True)


def check_command() -> None:
    """Start-up hook (:func:`biaslab.runtime.startup.start`): for a DVC process, claim the
    workspace for a workspace run, or print the refusal and end the process with exit status 2 (``os._exit``:
    this runs inside the interpreter's start-up, where ``SystemExit`` is not handled cleanly),
    and print the warnings of the module docstring; for a process started by a workspace run
    (``BIASLAB_WORKSPACE_RUN`` set), register it. A no-op for every other process; an OS error
    of the check itself is ignored (a broken check must not break the interpreter).
    ``BIASLAB_NO_GUARD=1`` turns it off."""
    if os.environ.get("BIASLAB_NO_GUARD"):
        return
    argv = list(getattr(sys, "argv", None) or [])
    orig = list(getattr(sys, "orig_argv", None) or [])
    kind = classify(argv, orig)
    if kind is None:
        claim = os.environ.get(ENV)
        if claim and dvc_args(argv, orig) is None:
            try:
                f = register_stage(Path(claim))
            except OSError:
                return
            if f is not None:
                atexit.register(_unlink, f)
        return
    try:
        claim = claim_or_refuse(argv, orig_argv=orig)
    except Refused as e:
        print(str(e), file=sys.stderr, flush=True)
        os._exit(2)
    except OSError:
        return
    if kind in ("workspace", "isolated"):
        if os.environ.get("BIASLAB_NUMERICS"):
            print(f"biaslab: warning: BIASLAB_NUMERICS={os.environ['BIASLAB_NUMERICS']} is "
                  f"ignored by the stages: each stage's cmd sets the numeric mode from params "
                  f"numerics.mode / numerics.decoding, so that dvc.lock records it. Use "
                  f"`dvc exp run -S numerics.mode=...`.", file=sys.stderr, flush=True)
        args = dvc_args(argv, orig) or []
        cd, words, _ = parse(args)
        root = repo_root((Path.cwd() / cd if cd else Path.cwd()).resolve())
        is_exp = words[:1] in (["exp"], ["experiments"])
        if root is not None:
            problem = data_root_problem(root, run_params(root, _overrides(args) if is_exp
                                                         else None) or {})
            if problem:      # before DVC removes a stage's outputs to re-run it
                print(f"biaslab: refused: {problem}. Nothing was written.", file=sys.stderr,
                      flush=True)
                if claim is not None:
                    release(claim)
                os._exit(2)
        if root is not None and is_exp:
            _warn_replaced(root, args)
    if claim is not None:
        os.environ[ENV] = str(claim)
        atexit.register(release, claim)
