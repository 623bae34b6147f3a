"""Atomic, deterministic file I/O shared by the stages.

Every writer writes to a temporary file in the destination directory and renames it into place
(``os.replace`` is atomic on POSIX), so a killed stage never leaves a half-written artifact.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml


class InputError(ValueError):
    """Bad user input: the message names the file and the problem."""

    def __init__(self, path: str | os.PathLike, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")

    def __reduce__(self):
        # picklable (the default reduce calls __init__ with the one formatted message): the
        # error crosses process boundaries (biaslab.runtime.parallel workers, Ray actors)
        return type(self), (self.path, self.problem)


class ParamsError(InputError):
    """A bad value in params.yaml; ``param`` is its dotted name (``filters.weights``)."""

    def __init__(self, path: str | os.PathLike, param: str, problem: str):
        self.param = param
        self.param_problem = problem
        super().__init__(path, f"{param}: {problem}")

    def __reduce__(self):
        return type(self), (self.path, self.param, self.param_problem)


#: the largest file a reader that loads its input whole accepts (bytes, 2 GiB): COCO's largest
#: annotation file (instances_train2017.json) is 448 MB
MAX_INPUT_BYTES = 2 * 1024 ** 3


def check_input_file(path: str | os.PathLike, max_bytes: int | None = MAX_INPUT_BYTES) -> Path:
    """``path`` as a Path if it is an existing regular file of at most ``max_bytes`` bytes
    (None: any size); else ``InputError`` (not found / a directory / not a regular file: a
    device such as /dev/zero or a FIFO, which would be read without end / too large)."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found")
    if path.is_dir():
        raise InputError(path, "is a directory, expected a file")
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise InputError(path, "is not a regular file (a device, FIFO or socket); give a file")
    if max_bytes is not None and st.st_size > max_bytes:
        raise InputError(path, f"is {st.st_size / 2 ** 20:.0f} MiB, over the "
                               f"{max_bytes / 2 ** 20:.0f} MiB this input may have")
    return path


def check_output_file(path: str | os.PathLike) -> Path:
    """``path`` as a Path if a file can be written there (checked before long work): not an
    existing directory, and its nearest existing parent is a directory. ``InputError``
    otherwise."""
    path = Path(path)
    if path.is_dir():
        raise InputError(path, "is a directory; give a file name for the output")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(path, f"cannot create it: {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise InputError(path, f"cannot create it: {parent} is not writable")
    return path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ""):
    """Yield a temporary path next to ``path``; rename it to ``path`` if the block succeeds,
    delete it if the block raises. Parent directories are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or path.suffix,
                               dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; artifacts should be normal files
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(directory: str | os.PathLike):
    """Yield a temporary directory next to ``directory``; when the block succeeds, give its
    entries normal permissions (mkdtemp/safetensors create 0700/0600) and replace
    ``directory`` with it; when it raises, delete it. Saved models are never half-written."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        for p in [tmp, *tmp.rglob("*")]:
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~umask)
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON with sorted keys (stable bytes -> DVC cache hits)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def _json_default(o):
    import numpy as np
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def json_number(v, digits: int = 4):
    """A metric for a JSON metrics file: None and non-finite floats -> None (JSON has no NaN),
    integers stay ints, other numbers are rounded to ``digits`` decimals."""
    if v is None:
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = float(v)
    return round(v, digits) if np.isfinite(v) else None


#: keys whose values depend on the run, not on the inputs: wall time, throughput, cache state.
RUN_STAT_KEYS = ("seconds", "_per_s", "encoded_now")


def without_run_stats(obj: Any) -> Any:
    """``obj`` with every dict key ending in one of ``RUN_STAT_KEYS`` dropped, recursively.

    Saved models keep their training metadata but not these: the same inputs must give the
    same bytes, or DVC re-runs every stage downstream of a re-trained model (the metrics files
    keep the timings)."""
    if isinstance(obj, dict):
        return {k: without_run_stats(v) for k, v in obj.items()
                if not (isinstance(k, str) and k.endswith(RUN_STAT_KEYS))}
    if isinstance(obj, (list, tuple)):
        return [without_run_stats(v) for v in obj]
    return obj


def write_parquet(path: str | os.PathLike, df: pd.DataFrame) -> None:
    """Write a DataFrame as parquet (no index), atomically."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def read_parquet(path: str | os.PathLike) -> pd.DataFrame:
    """Read a parquet table; a missing or unreadable file raises ``InputError`` naming it."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found (did the stage that writes it run?)")
    if path.is_dir():
        raise InputError(path, "is a directory, expected a parquet file")
    try:
        return pd.read_parquet(path)
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise InputError(path, f"not a readable parquet file ({e})") from e


#: why a caption stage writes no result on data without captions (stage outputs say it)
NO_CAPTIONS = ("the data has no captions (OpenImages with MIAP: image gender from perceived "
               "labels), so captioners, LIBRA, LIC and caption retrieval do not apply")


def has_captions(path: str | os.PathLike = "data/prepared/captions.parquet") -> bool:
    """True when the captions table at ``path`` (prepared or labelled) has a row. Reads the
    parquet footer only. Raises InputError when the file is missing or unreadable."""
    import pyarrow.parquet as pq
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found (did the stage that writes it run?)")
    try:
        return pq.read_metadata(path).num_rows > 0
    except Exception as e:
        raise InputError(path, f"not a readable parquet file ({e})") from e


def skip_without_captions(stage: str, outs: list[str],
                          captions: str | os.PathLike = "data/prepared/captions.parquet"
                          ) -> bool:
    """On data without captions, write every output of ``stage`` as a skip record and return
    True (the stage then exits 0 and DVC caches the records); else return False.

    Outputs by suffix: ``.json`` -> ``{"skipped": NO_CAPTIONS}``; ``.parquet`` -> an empty
    table; ``.md`` / ``.csv`` -> one line saying so; anything else is a directory holding
    ``skipped.json``. Readers test ``is_skipped``."""
    if has_captions(captions):
        return False
    record = {"skipped": NO_CAPTIONS, "stage": stage}
    for out in outs:
        if out.endswith(".json"):
            write_json(out, record)
        elif out.endswith(".parquet"):
            write_parquet(out, pd.DataFrame({"skipped": pd.Series(dtype="object")}))
        elif out.endswith((".md", ".csv")):
            with atomic_path(out) as tmp:
                tmp.write_text(f"skipped: {NO_CAPTIONS}\n")
        else:
            with atomic_dir(out) as tmp:
                (tmp / "skipped.json").write_text(json.dumps(record, indent=2,
                                                             sort_keys=True) + "\n")
    print(f"{stage}: skipped, {NO_CAPTIONS}", flush=True)
    return True


def is_skipped(obj: Any) -> bool:
    """True for a record written by ``skip_without_captions`` (a loaded JSON, or a path to
    a JSON file or an output directory)."""
    if isinstance(obj, (str, os.PathLike)):
        p = Path(obj)
        p = p / "skipped.json" if p.is_dir() else p
        if not p.is_file() or p.suffix != ".json":
            return False
        try:
            obj = json.loads(p.read_text())
        except (OSError, ValueError):
            return False
    return isinstance(obj, dict) and "skipped" in obj


def read_json(path: str | os.PathLike, max_bytes: int | None = MAX_INPUT_BYTES) -> Any:
    """Read JSON; missing, empty, truncated or invalid files, files that are not regular
    files or larger than ``max_bytes`` (:func:`check_input_file`) raise ``InputError`` naming
    the file and the position of the problem."""
    path = check_input_file(path, max_bytes)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"not UTF-8 text (byte {e.object[e.start:e.start + 1]!r} at "
                               f"offset {e.start}); JSON files must be UTF-8") from e
    except OSError as e:
        raise InputError(path, f"cannot read it ({e.strerror or e})") from e
    if not text.strip():
        raise InputError(path, "file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"invalid or truncated JSON at line {e.lineno} column "
                               f"{e.colno}: {e.msg}") from e


def load_image(path: str | os.PathLike) -> np.ndarray:
    """RGB uint8 array (H, W, 3) of an image file.

    Raises:
        InputError: missing or unreadable file.
    """
    from PIL import Image
    path = Path(path)
    if not path.exists():
        raise InputError(path, "image file not found")
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"))
    except Exception as e:
        raise InputError(path, f"not a readable image ({e})") from e


def _stage_name() -> str | None:
    """The running stage script's name (``stages/<name>.py`` run as ``__main__``), else None."""
    f = getattr(sys.modules.get("__main__"), "__file__", None)
    if f and Path(f).parent.name == "stages":
        return Path(f).stem
    return None


def _install_stage_excepthook(stage: str) -> None:
    """In a stage script, an ``InputError`` that the script does not catch prints
    ``<stage>: <file>: <problem>`` (one line, exit code 1 like the scripts' own handlers)
    instead of a traceback; other exceptions keep the traceback."""
    if getattr(sys.excepthook, "_biaslab_stage", None) == stage:
        return
    previous = sys.excepthook

    def hook(kind, value, tb):
        if isinstance(value, InputError):
            print(f"{stage}: {value}", file=sys.stderr)
        else:
            previous(kind, value, tb)

    hook._biaslab_stage = stage
    sys.excepthook = hook


def load_params(path: str | os.PathLike = "params.yaml", validate: bool = True) -> dict:
    """Load the DVC params file as a dict and validate the groups it has
    (``biaslab.runtime.validate.check_params``: one check per group, at stage start).

    Raises:
        InputError: file missing, a directory, or not YAML.
        ParamsError: a value that would give a traceback or a silently wrong result; the
            message reads ``params.yaml: filters.weights: ...``. When the caller is a stage
            script (``stages/<name>.py`` run as the main program) this prints
            ``<name>: params.yaml: filters.weights: ...`` to stderr and exits 2 instead, and
            so it does for a ``data.root`` that is not a directory
            (``biaslab.runtime.guard.data_root_problem``).

    In a stage script it also installs a ``sys.excepthook`` that prints an uncaught
    ``InputError`` as one line ``<name>: <file>: <problem>`` (exit code 1) instead of a
    traceback.
    """
    stage = _stage_name()
    if stage is not None:
        _install_stage_excepthook(stage)
    path = Path(path)
    if not path.exists():
        raise InputError(path, "params file not found (run from the repository root)")
    if path.is_dir():
        raise InputError(path, "is a directory, expected the params YAML file")
    try:
        with open(path, encoding="utf-8") as f:
            params = yaml.safe_load(f) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(path, f"not a readable YAML file ({e})") from e
    if not isinstance(params, dict):
        raise InputError(path, f"expected a mapping of param groups, got "
                               f"{type(params).__name__}")
    if validate:
        from biaslab.runtime.validate import ParamError, check_params
        try:
            check_params(params)
        except ParamError as e:
            err = ParamsError(path, e.param, e.problem)
            if stage is not None:
                print(f"{stage}: {err}", file=sys.stderr)
                raise SystemExit(2) from err
            raise err from e
        if stage is not None:        # the stage's data must be there (synthetic: made here)
            from biaslab.runtime.guard import data_root_problem
            problem = data_root_problem(Path.cwd(), params)
            if problem:
                print(f"{stage}: {path}: {problem}", file=sys.stderr)
                raise SystemExit(2)
    return params


def stage_parser(doc: str | None) -> argparse.ArgumentParser:
    """The argument parser of a stage script (one skeleton): ``--help`` prints
    the script's docstring (what it reads, writes and which params), and an argument the stage
    does not define is refused with the usage line (exit 2) instead of being ignored. A stage
    with path or selection arguments adds them to this parser."""
    return argparse.ArgumentParser(description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def run_stage(main, errors: tuple[type[BaseException], ...] = ()) -> None:
    """The entry point of every stage script: ``main(sys.argv[1:])``, exiting with its code.

    ``main(argv) -> int`` returns the exit code (0: done). A stage started outside the numeric
    mode ``dvc.yaml`` gives it says so first (:func:`biaslab.runtime.numerics.
    stage_mode_note`; not checked under DVC, which sets ``DVC_STAGE`` and runs each stage in
    its mode). An :class:`InputError` (a bad input
    file or param: the message names the file and the problem), or one of ``errors`` (the
    stage's own expected failures, e.g. ``ValueError`` from a library check on its data),
    prints one line ``<stage>: <message>`` on stderr and exits 1, instead of a traceback; any
    other exception keeps its traceback (a bug, not an input).

    Raises:
        SystemExit: a non-zero exit code of ``main``, or 1 on an expected error.
    """
    stage = _stage_name() or Path(sys.argv[0]).stem
    if "DVC_STAGE" not in os.environ:   # DVC sets it: its stages run in their mode
        from biaslab.runtime.numerics import stage_mode_note
        note = stage_mode_note(stage)
        if note:    # a stage run by hand outside the pipeline's numeric mode
            print(note, file=sys.stderr)
    try:
        code = main(sys.argv[1:])
    except (InputError, *errors) as e:
        sys.exit(f"{stage}: {e}")
    if code:        # 0: return as a script that ends normally (runpy callers see no exit)
        sys.exit(code)
