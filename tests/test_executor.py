"""biaslab.runtime.executor: params, the local executor, the clear error without ray, and a
real 2-CPU Ray cluster on loopback (started once for the module) running the per-shard work of
generate (copy_paste), features and score (the feature encoding of candidates) with the bytes
compared against the local executor, plus a worker killed mid-shard. The cluster tests take
~35 s on the shared 2-core machine (cluster start ~10 s), so they are marked slow."""
import hashlib
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab.runtime import executor as X
from biaslab.runtime.io import InputError

RAY = {"name": "ray", "max_retries": 2}


# ---------------------------------------------------------------- params, local, no ray
def test_resolve_fills_ray_defaults_and_names_bad_params():
    assert X.resolve(None) == {"name": "local", "workers": 1}         # callers without params
    assert X.resolve({"name": "local"}) == {"name": "local", "workers": 2}   # conf default
    assert X.resolve({"name": "local", "workers": 5}) == {"name": "local", "workers": 5}
    assert X.resolve({"name": "local", "workers": None})["workers"] is None
    with pytest.raises(ValueError, match="executor.workers"):
        X.resolve({"name": "local", "workers": 0})
    r = X.resolve({"name": "ray", "workers": 2})
    assert r == {"name": "ray", "address": None, "num_cpus": None, "workers": 2,
                 "num_cpus_per_task": 1, "num_gpus_per_task": 0, "max_retries": 3}
    assert X.is_ray({"name": "ray"}) and not X.is_ray({})
    with pytest.raises(ValueError, match="executor.name"):
        X.resolve({"name": "dask"})
    with pytest.raises(ValueError, match="executor.workers"):
        X.resolve({"name": "ray", "workers": 0})
    with pytest.raises(ValueError, match="executor.num_gpus_per_task"):
        X.resolve({"name": "ray", "num_gpus_per_task": -1})
    with pytest.raises(ValueError, match="executor.address"):
        X.resolve({"name": "ray", "address": "somewhere"})
    assert X.resolve({"name": "ray", "address": "ray://10.0.0.1:10001"})["address"] \
        == "ray://10.0.0.1:10001"


def test_local_runs_in_order_in_process_with_one_init():
    inits = []

    def init():
        inits.append(os.getpid())
        return 10

    out = list(X.run_shards(lambda st, s: (st + s, os.getpid()), [3, 1, 2], None, init=init))
    assert out == [(13, os.getpid()), (11, os.getpid()), (12, os.getpid())]
    assert inits == [os.getpid()]
    assert list(X.run_shards(lambda st, s: s, [], None, init=init)) == []
    assert len(inits) == 1                     # no shard -> no model load


def _state_pid():
    return ("init", os.getpid())


def _with_pid(state, shard):
    return shard * 10, state, os.getpid()


def test_local_workers_fork_keep_shard_order_and_init_once_per_worker():
    shards = [5, 3, 8, 1, 9, 2]
    out = list(X.run_shards(_with_pid, shards, {"name": "local", "workers": 2},
                            init=_state_pid))
    assert [o[0] for o in out] == [50, 30, 80, 10, 90, 20]          # shard order
    pids = {o[2] for o in out}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    for _, state, pid in out:
        assert state == ("init", pid)           # init ran in the worker that used the state
    assert X.in_process(None) and X.in_process({"name": "local", "workers": 1})
    assert not X.in_process({"name": "local", "workers": 2})
    assert X.in_process({"name": "local", "workers": 2}, n_shards=1)   # one shard: here
    assert not X.in_process({"name": "ray"})


def test_local_workers_raise_a_failing_shards_own_error():
    with pytest.raises(InputError, match="img-2.jpg"):
        list(X.run_shards(_fail_on_two, [0, 1, 2, 3], {"name": "local", "workers": 2}))


def test_missing_ray_gives_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)      # `import ray` raises ImportError
    with pytest.raises(ImportError, match=r"executor\.name is 'ray'.*\.\[ray\]"):
        X.run_shards(lambda st, s: s, [1], {"name": "ray"})
    # the local executor never imports ray
    assert list(X.run_shards(lambda st, s: s, [1], {"name": "local"})) == [1]


def test_session_connects_lazily_once_and_stops_what_it_started(monkeypatch):
    """Fake ray: the first run_shards inside a session connects (starting a cluster), the
    second reuses it, the session's exit shuts it down once; nothing to run -> no connect."""
    calls = Counter()

    class FakeRay:
        @staticmethod
        def shutdown():
            calls["shutdown"] += 1

    def fake_connect(p):
        calls["connect"] += 1
        return calls["connect"] == 1                   # only the first call starts a cluster

    def fake_run(fn, shards, init, p):               # _run_ray without the actors
        if X._acquire(p):
            calls["owned_by_call"] += 1
        yield from (fn(None, s) for s in shards)

    monkeypatch.setattr(X, "import_ray", lambda: FakeRay)
    monkeypatch.setattr(X, "connect", fake_connect)
    monkeypatch.setattr(X, "_run_ray", fake_run)
    with X.session({"name": "ray"}) as p:
        assert p["name"] == "ray" and calls["connect"] == 0
        assert list(X.run_shards(lambda st, s: s, [], p)) == []
        assert calls["connect"] == 0                   # nothing to compute: no cluster
        assert list(X.run_shards(lambda st, s: 2 * s, [1, 2], p)) == [2, 4]
        assert list(X.run_shards(lambda st, s: s, [3], p)) == [3]
        assert calls["shutdown"] == 0
    assert calls == {"connect": 2, "shutdown": 1}
    with X.session(None):                              # local: nothing at all
        pass
    assert calls["shutdown"] == 1
    monkeypatch.setattr(X, "connect", lambda p: True)
    assert X._acquire({"name": "ray"}) is True         # no session: the call stops its cluster


# ---------------------------------------------------------------- a real Ray cluster
@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray", reason="the ray extra (scripts/test.sh installs it)")
    import ray
    assert not ray.is_initialized()
    assert X.connect({"address": None, "num_cpus": 2})    # the stage's own start-up path
    assert ray.cluster_resources()["CPU"] == 2
    yield ray
    ray.shutdown()


def _digest_tree(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """16 synthetic images -> copy_paste work items in 4 shards, and the local executor's
    generate output (the reference every Ray run must reproduce byte for byte)."""
    from biaslab.data.coco import read_coco
    from biaslab.counterfactual.generate import build_work, generate_candidates, make_prompts
    from biaslab.counterfactual.masks import build_masks
    from biaslab.data.labels import label_captions, label_images
    from biaslab.data.synthetic import generate as make_synthetic
    root = tmp_path_factory.mktemp("exec")
    make_synthetic(root / "raw", n_images=16, image_size=96, seed=1)
    tables, _ = read_coco(root / "raw", progress=False)
    labels = label_images(label_captions(tables["captions"]))
    masks, _ = build_masks(tables["images"], tables["persons"], labels, None, root / "png",
                           splits=None, dilate_px=2, progress=False)
    prompts = make_prompts(tables["captions"], masks["image_id"])
    work = build_work(masks, tables["images"], tables["persons"], prompts, shards=4)[0]
    s = {"root": root, "tables": tables, "labels": labels, "work": work}
    local = root / "local"
    local.mkdir()
    cwd = os.getcwd()
    os.chdir(local)                                   # relative out_dir, as in the stage
    try:
        s["table"], _ = generate_candidates(work, _backend(s), "gen", **_KW)
    finally:
        os.chdir(cwd)
    s["digests"] = _digest_tree(local / "gen")
    assert set(work["shard"]) == {0, 1, 2, 3} and len(s["digests"]) == len(s["table"]) + 4
    return s


_KW = dict(m=2, guidance_scales=[7.5, 9.5], seed=0, shards=4, progress=False)


def _backend(s):
    from biaslab.counterfactual.copy_paste import CopyPasteBackend, donor_pool
    t = s["tables"]
    return CopyPasteBackend(donor_pool(t["persons"], t["images"], s["labels"]), feather_px=1.0)


def _run_generate(s, where: Path, monkeypatch, **kw):
    from biaslab.counterfactual import generate as G
    written = Counter()
    real = G._write_shard

    def counting(path, df, fp):
        written[Path(path).name] += 1
        real(path, df, fp)

    monkeypatch.setattr(G, "_write_shard", counting)
    where.mkdir()
    monkeypatch.chdir(where)
    table, stats = G.generate_candidates(s["work"], _backend(s), "gen", **_KW, **kw)
    return table, stats, written


@pytest.mark.slow
def test_generate_on_ray_is_byte_identical(cluster, synth, tmp_path, monkeypatch):
    table, stats, written = _run_generate(synth, tmp_path / "ray", monkeypatch,
                                          executor={**RAY, "workers": 2})
    assert stats["shards_computed"] == 4
    assert written == {f"shard-00{i}.parquet": 1 for i in range(4)}
    pd.testing.assert_frame_equal(table, synth["table"])
    assert _digest_tree(tmp_path / "ray" / "gen") == synth["digests"]


def test_generate_on_forked_local_workers_is_byte_identical(synth, tmp_path, monkeypatch):
    table, stats, written = _run_generate(synth, tmp_path / "forked", monkeypatch,
                                          executor={"name": "local", "workers": 2})
    assert stats["shards_computed"] == 4
    assert written == {f"shard-00{i}.parquet": 1 for i in range(4)}
    pd.testing.assert_frame_equal(table, synth["table"])
    assert _digest_tree(tmp_path / "forked" / "gen") == synth["digests"]


class KillOnce:
    """Generate callback (runs in the Ray worker): on the first attempt at ``shard`` it
    publishes the worker's pid and slows down until the test kills the process."""

    def __init__(self, d: str, shard: int):
        self.d, self.shard = Path(d), shard

    def __call__(self, shard, image_id, group, j):
        if shard != self.shard or (self.d / "killed").exists():
            return
        (self.d / "pid").write_text(str(os.getpid()))
        time.sleep(0.5)


@pytest.mark.slow
def test_a_worker_killed_mid_shard_is_replaced_and_every_shard_written_once(
        cluster, synth, tmp_path, monkeypatch):
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    killed = []

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline and not (ctl / "pid").exists():
            time.sleep(0.05)
        pid = int((ctl / "pid").read_text())
        (ctl / "killed").touch()                       # the retried shard runs at full speed
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    table, stats, written = _run_generate(synth, tmp_path / "ray", monkeypatch,
                                          executor={**RAY, "workers": 2},
                                          callback=KillOnce(str(ctl), 1))
    th.join(5)
    assert killed and killed[0] != os.getpid()           # a worker process, not the driver
    assert stats["shards_computed"] == 4
    assert written == {f"shard-00{i}.parquet": 1 for i in range(4)}   # each exactly once
    assert not table.duplicated(["image_id", "group", "j"]).any()
    pd.testing.assert_frame_equal(table, synth["table"])
    assert _digest_tree(tmp_path / "ray" / "gen") == synth["digests"]


def _fail_on_two(state, shard):
    if shard == 2:
        raise InputError("img-2.jpg", "not a readable image")
    return shard


@pytest.mark.slow
def test_a_failing_shard_raises_its_own_error_in_the_driver(cluster):
    with pytest.raises(InputError, match="img-2.jpg"):
        list(X.run_shards(_fail_on_two, [0, 1, 2, 3], RAY))


class _Scorer:
    """A feature-taking 'CLIP': the first 8 feature dims, L2-normalised; texts by hash."""
    accepts_features = True

    def encode_images(self, x):
        x = np.asarray(x, np.float64)[:, :8]
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def encode_texts(self, texts):
        return np.array([np.random.default_rng(len(t)).normal(size=8) for t in texts])


class _Objects:
    accepts_features = True

    def predict_sets(self, x):
        return [{k for k in range(4) if row[k] > np.median(row[:32])} for row in x]


@pytest.mark.slow
def test_features_and_score_on_ray_are_byte_identical(cluster, synth, tmp_path):
    """Stage features' encode_cached and stage score's candidate encoding through both
    executors into separate caches (batch_size 2: the Ray tasks keep the local batches)."""
    _features_and_score_equal(synth, tmp_path, {**RAY, "workers": 2})


def test_features_and_score_on_forked_local_workers_are_byte_identical(synth, tmp_path):
    _features_and_score_equal(synth, tmp_path, {"name": "local", "workers": 2})


def _features_and_score_equal(synth, tmp_path, other):
    from biaslab.models.features import RAY_TASK_IMAGES, encode_cached
    from biaslab.counterfactual.filters import score_candidates
    from biaslab.runtime.io import write_parquet
    table = synth["table"]
    gen = synth["root"] / "local"
    cands = table[table["image_id"].isin(sorted(table["image_id"].unique())[:3])].copy()
    cands["path"] = [str(gen / p) for p in cands["path"]]
    imgs = synth["tables"]["images"][["image_id", "path"]].head(6)
    assert len(cands) > RAY_TASK_IMAGES                # more than one Ray task
    outs = {}
    for name, ex in (("local", None), ("ray", other)):
        cache = tmp_path / name / "cache"
        enc = dict(cache_dir=cache, image_size=64, batch_size=2, num_threads=1, executor=ex)
        st: dict = {}
        ids, feats = encode_cached(imgs, **enc, stats=st)
        assert st["computed"] == len(imgs)
        scores = score_candidates(
            cands, dict(zip(synth["tables"]["images"]["image_id"],
                            synth["tables"]["images"]["path"])), _Scorer(), _Objects(),
            encode=lambda t: encode_cached(t, **enc)[1],
            real_groups={int(i): "female" for i in cands["image_id"]},
            knn={"k": 3, "tau_r": 0.1, "tau_g": 0.5})
        write_parquet(tmp_path / name / "scores.parquet", scores)
        outs[name] = (feats.tobytes(), (tmp_path / name / "scores.parquet").read_bytes(),
                      _digest_tree(cache))
    assert outs["ray"][0] == outs["local"][0]          # features stage rows
    assert outs["ray"][1] == outs["local"][1]          # score table bytes
    assert outs["ray"][2] == outs["local"][2]          # the caches themselves
