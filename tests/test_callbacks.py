"""BackupAndRestore: NeuPSLModel.fit resumes after a crash exactly where an uninterrupted run would be."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import pslbridge  # noqa: E402
from pslbridge import Bridge  # noqa: E402
from pslbridge.callbacks import BackupAndRestore  # noqa: E402
from pslbridge.errors import CheckpointError, ConfigurationError  # noqa: E402
from pslbridge.examples.mnist_addition import add1_spec  # noqa: E402
from pslbridge.keras import NeuPSLModel, ProgramData  # noqa: E402

from conftest import REPO  # noqa: E402

#: One training script for the in-process and the killed runs: 20 additions in 2 mini-batches, a softmax network
#: with a running class prior (non-trainable state), learned rule weights, two passes an epoch, Keras' shuffle.
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import keras, numpy as np
    from pslbridge import Bridge
    from pslbridge.callbacks import BackupAndRestore
    from pslbridge.examples.mnist_addition import add1_spec
    from pslbridge.keras import ClassBalance, NeuPSLModel, ProgramData
    from pslbridge.learning import WeightOptimizer

    rng = np.random.default_rng(0)
    digits = rng.integers(0, 10, size=40)
    features = (np.eye(10)[digits] @ rng.normal(size=(10, 8)) + rng.normal(scale=0.5, size=(40, 8))).astype("float32")
    pairs = [(2 * k, 2 * k + 1) for k in range(20)]
    sums = [int(digits[a] + digits[b]) for a, b in pairs]

    def batches():
        out = []
        for k in range(0, 20, 10):
            bridge = Bridge(add1_spec(pairs[k : k + 10], sums=sums[k : k + 10], phase="learn"))
            images = bridge.entities("Neural")["arg0"].astype(int).to_numpy()
            out.append((bridge, {"Neural": features[images]}))
        return out

    def model():
        keras.utils.set_random_seed(0)
        layers = [keras.Input((8,)), keras.layers.Dense(10, activation="softmax"), ClassBalance(1.0, momentum=0.9)]
        m = NeuPSLModel({"Neural": keras.Sequential(layers)}, weights=WeightOptimizer())
        m.compile(optimizer=keras.optimizers.Adam(0.05))
        return m

    def weights(m):
        return np.concatenate([np.ravel(w) for w in m.get_weights()] + [m.rule_weights])

    class KillAt(keras.callbacks.Callback):
        def __init__(self, step):
            super().__init__()
            self.step, self.seen = step, 0

        def on_train_batch_end(self, batch, logs=None):
            self.seen += 1
            if self.seen == self.step:
                os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _run(code: str, tmp_path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT + textwrap.dedent(code)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_crash_after_an_epoch_resumes_exactly_where_an_uninterrupted_run_ends(tmp_path):
    """Epoch 2 of 4 raises; a new process state (other seeds, new programs, a new ProgramData seed) resumes after
    epoch 1 and ends with the uninterrupted run's network weights, class-prior state and rule weights (to float
    precision: the re-grounded programs may hold their terms in another order, as PSL grounds in parallel)."""
    namespace: dict = {}
    exec(SCRIPT, namespace)
    batches, model, weights = namespace["batches"], namespace["model"], namespace["weights"]
    try:
        _crash_and_resume(batches, model, weights, tmp_path)
    finally:
        pslbridge.close_all()  # a failure must not leave programs (and their predicates) behind


def _crash_and_resume(batches, model, weights, tmp_path):
    straight_data = batches()
    straight = model()
    straight.fit(ProgramData(straight_data, passes=2, seed=3), epochs=4, verbose=0)

    class Crash(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("crash")

    path = tmp_path / "run.ckpt"
    crashed_data = batches()
    with pytest.raises(RuntimeError, match="crash"):
        model().fit(
            ProgramData(crashed_data, passes=2, seed=3),
            epochs=4,
            verbose=0,
            callbacks=[BackupAndRestore(path), Crash()],
        )
    assert path.is_file()
    for bridge, _ in crashed_data:
        bridge.close()

    resumed_data = batches()
    resumed = model()
    keras.utils.set_random_seed(123)  # another process state: everything that matters comes from the checkpoint
    backup = BackupAndRestore(path)
    history = resumed.fit(ProgramData(resumed_data, passes=2, seed=99), epochs=4, verbose=0, callbacks=[backup])
    assert backup.resumed_from == 1 and history.epoch == [2, 3]
    np.testing.assert_allclose(weights(resumed), weights(straight), rtol=1e-5, atol=1e-6)
    assert not path.exists()  # a fit that ended removes it (Keras' behaviour)


def test_a_checkpoint_of_other_networks_programs_or_trainers_is_refused(tmp_path):
    path = tmp_path / "run.ckpt"
    with (
        Bridge(add1_spec([(0, 1)], sums=[9], phase="learn")) as one,
        Bridge(add1_spec([(0, 1), (2, 3)], sums=[9, 4], phase="learn")) as two,
    ):

        def fit(bridge, units, **kwargs):
            net = keras.Sequential([keras.Input((units,)), keras.layers.Dense(10, activation="softmax")])
            model = NeuPSLModel({"Neural": net})
            model.compile(optimizer=keras.optimizers.Adam(0.1))
            rows = bridge.neural_shape("Neural")[0]
            data = ProgramData([(bridge, {"Neural": np.ones((rows, units), dtype="float32")})])
            return model.fit(data, epochs=1, verbose=0, callbacks=[BackupAndRestore(path, **kwargs)])

        fit(one, 3, delete_at_end=False)
        with pytest.raises(CheckpointError, match="weights of shapes"):
            fit(one, 4)
        with pytest.raises(CheckpointError, match="written for programs of"):
            fit(two, 3)
        path.write_bytes(b"garbage")
        with pytest.raises(CheckpointError, match="run.ckpt"):
            fit(one, 3)

    with pytest.raises(ConfigurationError, match="NeuPSLModel"):
        plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        plain.compile(optimizer="sgd", loss="mse")
        plain.fit(np.ones((2, 2)), np.ones((2, 1)), epochs=1, verbose=0, callbacks=[BackupAndRestore(path)])


@pytest.mark.slow
@pytest.mark.subprocess
def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(tmp_path):
    """SIGKILL in the middle of epoch 3 of 4 (a hard crash: no Python clean-up runs), then a fresh process resumes
    from the last checkpoint: the final weights equal those of an uninterrupted run."""
    straight = _run(
        """
        data = batches()
        m = model()
        m.fit(ProgramData(data, passes=2, seed=3), epochs=4, verbose=0)
        np.save("straight.npy", weights(m))
        """,
        tmp_path,
    )
    assert straight.returncode == 0, straight.stderr[-3000:]
    run = """
        m = model()
        kill = [KillAt(int(os.environ.get("KILL_AT", "0")))] if os.environ.get("KILL_AT") else []
        m.fit(ProgramData(batches(), passes=2, seed=3), epochs=4, verbose=0,
              callbacks=[BackupAndRestore("run.ckpt")] + kill)
        np.save("resumed.npy", weights(m))
        """
    os.environ["KILL_AT"] = "10"  # 4 steps an epoch: the second step of epoch 3
    try:
        killed = _run(run, tmp_path)
    finally:
        del os.environ["KILL_AT"]
    assert killed.returncode == -signal.SIGKILL and (tmp_path / "run.ckpt").is_file()
    assert not (tmp_path / "resumed.npy").exists()
    resumed = _run(run, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    np.testing.assert_allclose(
        np.load(tmp_path / "resumed.npy"), np.load(tmp_path / "straight.npy"), rtol=1e-5, atol=1e-6
    )
