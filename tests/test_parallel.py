"""biaslab.runtime.parallel.map_jobs: same results as a loop, in order, on forked workers."""
import os

import numpy as np
import pytest

from biaslab.runtime.parallel import map_jobs, resolve_workers


def test_results_in_argument_order_and_equal_to_a_loop():
    big = np.arange(100_000, dtype=np.float64)      # a closure over data: inherited by fork

    def job(k):
        rng = np.random.default_rng(k)
        return float((big * rng.random()).sum()), os.getpid()

    seq = map_jobs(job, [3, 1, 2, 0], workers=1)
    par = map_jobs(job, [3, 1, 2, 0], workers=2)
    assert [v for v, _ in par] == [v for v, _ in seq]
    assert {pid for _, pid in seq} == {os.getpid()}          # one worker: this process
    assert os.getpid() not in {pid for _, pid in par}        # two: forked workers


def test_torch_runs_one_thread_in_workers():
    def job(_):
        import torch
        return torch.get_num_threads()

    assert map_jobs(job, [0, 1], workers=2) == [1, 1]


def test_a_failing_job_raises_here():
    def job(k):
        if k == 2:
            raise ValueError("seed 2 failed")
        return k

    with pytest.raises(ValueError, match="seed 2 failed"):
        map_jobs(job, [0, 1, 2, 3], workers=2)


@pytest.mark.parametrize("workers", [1, 2])
def test_on_done_runs_in_the_parent_once_per_job(workers):
    seen = []
    out = map_jobs(lambda k: k * 10, [3, 1, 2], workers=workers,
                   on_done=lambda i, r: seen.append((i, r, os.getpid())))
    assert out == [30, 10, 20]
    assert sorted(seen) == [(0, 30, os.getpid()), (1, 10, os.getpid()), (2, 20, os.getpid())]


def test_resolve_workers():
    assert resolve_workers(2, 3) == 2
    assert resolve_workers(4, 3) == 3          # never more workers than jobs
    assert resolve_workers(1, 0) == 1
    assert resolve_workers(None, 100) == len(os.sched_getaffinity(0))
    assert resolve_workers(0, 1) == 1


def test_workers_tolerate_dvclive_signal_removed_by_another_worker(tmp_path, monkeypatch):
    """DVCLive's shared VS Code signal file: a worker whose Live ends after another worker
    removed the file must not fail (CI's coco-mini run lost train_method@group_dro to it)."""
    import dvclive.live
    from dvclive import Live

    (tmp_path / ".dvc").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    signal = tmp_path / ".dvc/tmp/exps/run/DVCLIVE_STEP_COMPLETED"

    def job(k):
        with Live(dir=str(tmp_path / f"live{k}"), dvcyaml=False, save_dvc_exp=False) as live:
            live.log_metric("x", float(k))
            live.next_step()
            # the other worker's end() removed the file between this one's check and remove
            real_exists = os.path.exists
            import dvclive.vscode as vs
            vs.os.path.exists = lambda p: True if str(p) == str(signal) else real_exists(p)
            signal.unlink(missing_ok=True)
        vs.os.path.exists = real_exists
        return k

    assert map_jobs(job, [0, 1], workers=2) == [0, 1]
    assert getattr(dvclive.live.cleanup_dvclive_step_completed, "_biaslab", False) is False
