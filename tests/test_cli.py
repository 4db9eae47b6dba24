import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pslbridge import Bridge

from conftest import EXAMPLES, REPO, run_python

pytestmark = pytest.mark.subprocess
SA = EXAMPLES / "simple-acquaintances"


def _cli(*args):
    """``python -m pslbridge ...`` as from a user's shell: without the TF_CPP_MIN_LOG_LEVEL that importing JAX
    (or TensorFlow) into this test process set, which the child would take for the user's own level."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PSLBRIDGE_QUIET_TF")}
    return subprocess.run(
        [sys.executable, "-m", "pslbridge", *args], capture_output=True, text=True, cwd=REPO, timeout=300, env=env
    )


def test_infer_writes_one_tsv_per_target_like_psl_cli(tmp_path, jvm_started):
    proc = _cli(
        "infer",
        str(SA / "simple-acquaintances.psl"),
        "--data",
        str(SA / "simple-acquaintances.data"),
        "--output",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["KNOWS.txt"]
    written = pd.read_csv(tmp_path / "KNOWS.txt", sep="\t", header=None, names=["arg0", "arg1", "value"])
    with Bridge(SA / "simple-acquaintances.json") as bridge:
        expected = bridge.infer().to_frame("Knows")
    assert written[["arg0", "arg1"]].values.tolist() == expected[["arg0", "arg1"]].values.tolist()
    np.testing.assert_allclose(written["value"], expected["value"], atol=1e-5)
    assert "objective" in proc.stderr


def test_infer_reports_bad_model_without_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"rules": ["1: A(X) -> B(X) ^2"], "predicates": {"A/1": {"observations": ["nope.txt"]}}}')
    proc = _cli("infer", str(bad))
    assert proc.returncode == 1  # model, engine and IO errors exit 1; usage errors 2 (argparse)
    assert "error:" in proc.stderr and "nope.txt" in proc.stderr and "Traceback" not in proc.stderr


def test_info_reports_verified_jar_and_java():
    proc = _cli("info")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checksum OK" in proc.stdout and "psl" in proc.stdout and "2.4.0" in proc.stdout


@pytest.mark.slow
def test_demo_trains_saves_loads_and_predicts(tmp_path):
    """`make demo` in a shortened form: training through PSL moves both accuracies, the curve and the model are
    written, the loaded model predicts the new additions, and TensorFlow's start-up noise stays off stderr."""
    import re

    proc = _cli("demo", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    before = re.search(r"before training: digit accuracy ([\d.]+) %, sum accuracy ([\d.]+) %", out)
    after = re.search(r"after training: +digit accuracy ([\d.]+) %, sum accuracy ([\d.]+) %", out)
    assert before and after, out
    assert float(after.group(1)) > float(before.group(1)) + 5  # 15 steps: ~7 % -> ~24 % digits
    assert (tmp_path / "learning-curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "add1.neupsl").stat().st_size > 10_000
    predictions = re.findall(r"image +\d+ \+ image +\d+: predicted sum +(\d+), true +(\d+)", out)
    assert len(predictions) == 5 and all(0 <= int(p) <= 18 for p, _ in predictions)
    assert "Epoch 3/3" in out  # Keras' own progress bar
    assert "cuda" not in proc.stderr.lower() and "absl" not in proc.stderr
    import importlib.util
    import os

    if not os.environ.get("KERAS_BACKEND") and importlib.util.find_spec("torch"):
        assert "Keras backend: torch" in out  # the fastest backend on a CPU is the demo's default


def test_acquaintances_demo_runs():
    proc = _cli("demo", "--example", "acquaintances")
    assert proc.returncode == 0, proc.stderr
    assert "most likely acquaintances" in proc.stdout


def test_import_is_light():
    proc = run_python("""
        import sys, pslbridge
        print("jpype" in sys.modules, "pslbridge.bridge" in sys.modules)
    """)
    assert proc.stdout.split() == ["False", "False"], proc.stderr


def test_infer_creates_no_output_folder_for_a_model_that_is_missing(tmp_path):
    proc = _cli("infer", str(tmp_path / "missing.json"), "--output", str(tmp_path / "out"))
    assert proc.returncode == 1 and "file not found" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_benchmarks_command_lists_its_stages_and_runs_none_without_a_name(capsys):
    from benchmarks.__main__ import main

    assert main(["--help"]) == 0 and "steps" in capsys.readouterr().out
    assert main([]) == 2 and "usage" in capsys.readouterr().out
    assert main(["no-such-stage"]) == 2 and "no benchmark stage 'no-such-stage'" in capsys.readouterr().err
