"""Experiment runs on Ray: one process per run, same results as the sequential runners, killed workers retried,
failed runs reported (not retried), finished runs not recomputed, and a clear error without Ray."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace

import pytest

from experiments.citation import runner as citation_runner
from experiments.mnist_add import runner as mnist_add_runner
from experiments.mnist_add.runner import Setting
from experiments.sweep import THREAD_VARIABLES, Run, run_all
from pslbridge.datasets.planetoid import default_dir
from pslbridge.errors import ConfigurationError

from conftest import REPO, run_python

TINY = Setting(digits=1, additions=20, test_additions=50, val_additions=20, epochs=2, steps_per_epoch=5)


def _kill_first_task(prefix: str, proc: subprocess.Popen) -> int | None:
    """kill -9 the first Ray worker seen running a task whose name starts with ``prefix``; its pid."""
    while proc.poll() is None:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        for line in ps.splitlines()[1:]:
            pid, _, args = line.strip().partition(" ")
            if args.startswith(f"ray::{prefix}"):
                time.sleep(3)  # well inside the run: TensorFlow and the JVM are up
                os.kill(int(pid), signal.SIGKILL)
                return int(pid)
        time.sleep(0.2)
    return None


_SWEEP = """
import json, sys
from pathlib import Path
from experiments.sweep import Run, run_all
runs = [Run(**r) for r in json.loads(sys.argv[1])]
seen = []
results = run_all(runs, Path(sys.argv[2]), workers=2, retries=2, on_result=lambda run, _: seen.append(run.key))
print(json.dumps({"seen": seen, "results": results}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not (default_dir() / "SHA256SUMS").is_file(), reason="Planetoid files not found")
def test_ray_sweep_matches_the_sequential_runs_and_survives_a_killed_worker(tmp_path, jvm_started):
    """A local Ray instance with 2 workers (loopback only) runs 2 tiny MNIST-Add1 splits, a citation split and a
    run that fails, and a trivial run that reports its thread settings (one PSL and one TensorFlow thread: each
    run declares one CPU). One MNIST worker is killed with SIGKILL mid-run: Ray retries it and the sweep completes.
    The results equal the same runs done one after another in this process; the failing run comes back as an error
    (not retried, not stored), and a restarted sweep recomputes none of the finished runs. The sweep is driven
    from a fresh process: this one runs the JVM, and a Ray driver started after the JVM breaks it (run_all
    refuses, see the last check)."""
    mnist_runs = [
        Run(
            f"add1-split{k}",
            "experiments.mnist_add.runner:run_split_task",
            {"setting": asdict(TINY), "split": k, "seed": 3, "baseline": False},
        )
        for k in (0, 1)
    ]
    cora = {"name": "cora", "overrides": {"steps": 3}, "seed": 0, "data_dir": None}
    task = "experiments.citation.runner:run_split_task"
    cora_run = Run("cora-split0", task, {**cora, "split_id": 0, "methods": ["lp_psl"]})
    bad = Run("bad", task, {**cora, "name": "pubmed", "split_id": 0, "methods": ["lp_psl"]})
    threads = Run("threads", "experiments.sweep:example_run", {"x": 1})
    runs = [*mnist_runs, cora_run, bad, threads]
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES} | {"PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", _SWEEP, json.dumps([asdict(r) for r in runs]), str(tmp_path)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    killed = _kill_first_task("pslbridge:add1-split0", proc)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    assert killed is not None, "no MNIST worker was seen running, so none was killed"
    report = json.loads(stdout.strip().splitlines()[-1])
    results = report["results"]
    assert sorted(report["seen"]) == sorted(r.key for r in runs)  # each once: the killed one after its retry
    assert "pubmed" in results["bad"]["error"] and "DataError" in results["bad"]["error"]
    # Each run declares one CPU and gets one PSL and one TensorFlow thread, not one per core of the machine.
    assert results["threads"]["threads"] == dict.fromkeys(THREAD_VARIABLES, "1")
    assert results["threads"]["pid"] != os.getpid()

    # The same runs one after another in this process.
    for k, run in zip((0, 1), mnist_runs):
        sequential = mnist_add_runner.run_split(TINY, k, 3, baseline=False)[0]
        remote = results[run.key]["outcomes"][0]
        for key in ("sum_acc", "digit_acc", "val_score", "best_epoch"):
            assert remote[key] == pytest.approx(sequential[key], abs=2.0), (k, key)
        assert remote["history"]["energy"] == pytest.approx(sequential["history"]["energy"], rel=1e-3)
    sequential_cora = citation_runner.run_split("cora", 0, {"steps": 3}, 0, None, ("lp_psl",))
    assert results[cora_run.key]["rows"][0]["test_acc"] == pytest.approx(sequential_cora[0]["test_acc"], abs=1e-9)
    assert results[cora_run.key]["rows"][0]["steps"] == sequential_cora[0]["steps"] == 3

    # Restarted here: the finished runs are stored, nothing runs (Ray is not started, so the JVM here is no
    # obstacle). The failed run is not stored: a restart would try it again.
    done = [*mnist_runs, cora_run]
    again = run_all(done, tmp_path, workers=2, on_result=lambda run, _: pytest.fail(f"{run.key} recomputed"))
    assert again[cora_run.key] == json.loads((tmp_path / "runs" / "cora-split0.json").read_text())
    assert again[cora_run.key] == results[cora_run.key]
    assert not (tmp_path / "runs" / "bad.json").exists()
    # With a run left to do, this process (it runs the JVM) may not drive Ray.
    with pytest.raises(ConfigurationError, match="already runs the JVM"):
        run_all(runs, tmp_path, workers=2)


_ORDER = """
import json, sys
from pathlib import Path
from experiments.sweep import Run, run_all
runs = [Run(f"run{i}", "experiments.sweep:example_run", {"x": i, "sleep_s": 0.5}, memory)
        for i, memory in enumerate([300, 300, 300, 200, 200, 100])]
seen = []
results = run_all(runs, Path(sys.argv[1]), workers=1, on_result=lambda run, _: seen.append(run.key))
print(json.dumps({"seen": seen, "started": [results[r.key]["started"] for r in runs]}))
"""


@pytest.mark.slow
def test_local_ray_starts_runs_in_the_order_given(tmp_path):
    """One worker, runs of three memory sizes: they start and finish in the order given (Ray alone
    takes turns between resource shapes, which ran MNIST-Add2-150 last in a reproduction that listed it second)."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES} | {"PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", _ORDER, str(tmp_path)], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["seen"] == [f"run{i}" for i in range(6)]
    assert report["started"] == sorted(report["started"])


def test_runner_cli_asks_for_ray_or_runs_without_it(tmp_path):
    """Without Ray installed, --ray is a usage error (status 2) naming the extra, before any work; the
    sequential path needs no Ray; --workers without --ray is refused."""
    proc = run_python(
        f"""
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed
        from experiments.__main__ import main
        for args in (["--ray"], ["--workers", "2"]):
            try:
                main(["citation", "--datasets", "cora", "--methods", "lp_psl", "--out", r"{tmp_path}", *args])
            except SystemExit as exc:
                print("exit", exc.code)
        """,
        timeout=120,
    )
    assert proc.stdout.split() == ["exit", "2", "exit", "2"], proc.stderr[-2000:]
    assert "pip install 'pslbridge[ray]'" in proc.stderr and "--workers applies to --ray runs only" in proc.stderr
    assert not (tmp_path / "results.csv").exists()  # refused before any work
    assert (REPO / "pyproject.toml").read_text().count("ray = [") == 1


def test_search_budgets_the_epochs_a_trial_may_train_and_refuses_fractional_epochs(tmp_path, capsys):
    """ASHA's budget (``max_t``) is the most epochs any trial may train: MNIST-Add2-150's default patience trains
    up to twice ``epochs``, so a budget of ``epochs`` would cut those trials short; an epoch field searched over a
    continuous range is a usage error, before Ray starts."""
    from experiments.search import epoch_budget, main

    add2 = mnist_add_runner.default_setting(2, 150)
    assert (add2.epochs, epoch_budget(add2, {})) == (40, 80)
    space = {"epochs": ("choice", [5, 50]), "patience": ("choice", [0, 4])}
    assert epoch_budget(Setting(epochs=20), space) == 100  # 50 epochs with patience: up to twice
    with pytest.raises(SystemExit) as exc:
        main(["--space", "epochs=uniform:5:10", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "--space epochs: epochs are whole numbers" in capsys.readouterr().err
    assert not (tmp_path / "search.json").exists()


@pytest.mark.slow
def test_search_chooses_on_validation_with_tune(tmp_path):
    """A Ray Tune search (ASHA scheduler, 2 local workers) over two learning rates on a tiny MNIST-Add1 split:
    every trial reports validation after each epoch, the written choice is the trial with the best validation
    score, and nothing about test accuracy is computed or recorded."""
    proc = run_python(
        f"""
        from experiments.search import main
        raise SystemExit(main(["--space", "learning_rate=choice:0.003,0.000001", "--samples", "2",
                               "--additions", "20", "--epochs", "3", "--steps-per-epoch", "5",
                               "--grace-epochs", "1", "--workers", "2", "--out", r"{tmp_path}"]))
        """,
        timeout=500,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "search.json").read_text())
    trials = report["trials"]
    assert len(trials) == 2 and all("error" not in t for t in trials), trials
    assert report["tuning_seed"] == 100 and report["base"]["epochs"] == 3
    assert all(1 <= t["epochs_run"] <= 3 and 0 <= t["best_epoch"] < 3 for t in trials)
    assert report["chosen"] == max(trials, key=lambda t: t["val_score"])["values"]
    assert "test" not in json.dumps(trials)  # only validation was measured
    assert "Chosen:" in (tmp_path / "search.md").read_text()


@pytest.mark.slow
def test_several_settings_share_one_ray_queue_and_each_gets_its_rows_and_curves(tmp_path):
    """``run_settings`` on Ray (2 workers): two settings' splits in one queue; every row lands under its own
    setting, each setting gets its curves, and the results match the same settings run one after another here
    (within the rounding of one PSL thread against several, as in the sweep test above)."""
    other = replace(TINY, additions=24, epochs=3)
    proc = run_python(
        f"""
        from pathlib import Path
        from experiments.mnist_add.runner import Setting, run_settings
        from experiments.sweep import RayOptions
        settings = [Setting(**s) for s in {[asdict(TINY), asdict(other)]!r}]
        run_settings(settings, 2, 3, Path(r"{tmp_path}"), baseline=False, ray=RayOptions(workers=2))
        """,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = sorted(csv.DictReader(open(tmp_path / "results.csv")), key=lambda r: (r["setting"], r["split"]))
    expected = [(s.name, str(k), str(s.additions), str(s.epochs)) for s in (TINY, other) for k in (0, 1)]
    assert [(r["setting"], r["split"], r["additions"], r["epochs"]) for r in rows] == expected
    assert {p.name for p in tmp_path.glob("curves-*.png")} == {"curves-add1-20.png", "curves-add1-24.png"}
    sequential = mnist_add_runner.run_settings([TINY, other], 2, 3, tmp_path / "sequential", baseline=False)
    assert [(r["setting"], r["split"]) for r in sequential] == [(s.name, k) for s in (TINY, other) for k in (0, 1)]
    for remote, local in zip(rows, sequential):
        assert float(remote["sum_acc"]) == pytest.approx(local["sum_acc"], abs=2.0)
        assert float(remote["digit_acc"]) == pytest.approx(local["digit_acc"], abs=2.0)
