"""Keras-native NeuPSL: model.fit with Keras' own callbacks, one forward pass per step, save and serve."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from pslbridge import Bridge, PslBridgeWarning  # noqa: E402
from pslbridge.errors import ConfigurationError  # noqa: E402
from pslbridge.examples.mnist_addition import add1_spec  # noqa: E402
from pslbridge.keras import LogGradientSoftmax, NeuPSLModel, ProgramData, load_neupsl  # noqa: E402
from pslbridge.learning import WeightOptimizer  # noqa: E402

from conftest import REPO, run_python  # noqa: E402

pytestmark = pytest.mark.usefixtures("jvm_started")

FEATURES = 6


class CountingSoftmax(keras.layers.Layer):
    """A dense softmax layer that counts its forward passes (in a variable: graph executions count too) and can
    output NaN from a given pass on."""

    def __init__(self, classes: int = 10, nan_from: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.classes, self.nan_from = classes, nan_from

    def build(self, shape):
        self.dense = keras.layers.Dense(self.classes)
        self.dense.build(shape)
        self.calls = self.add_weight(shape=(), initializer="zeros", trainable=False, name="calls")

    def call(self, inputs):
        self.calls.assign_add(1.0)
        out = tf.nn.softmax(self.dense(inputs))
        if self.nan_from >= 0:
            out = tf.where(self.calls > self.nan_from, tf.fill(tf.shape(out), np.nan), out)
        return out


def _network(nan_from: int = -1):
    layer = CountingSoftmax(nan_from=nan_from)
    model = keras.Sequential([keras.Input((FEATURES,)), layer])
    return model, layer


def _program(pairs, sums, seed=0):
    bridge = Bridge(add1_spec(pairs, sums=sums, phase="learn"))
    rng = np.random.default_rng(seed)
    return bridge, {"Neural": rng.normal(size=(bridge.neural_shape("Neural")[0], FEATURES)).astype(np.float32)}


@pytest.mark.parametrize("eager", [False, True])
def test_fit_runs_each_network_forward_once_per_step_and_calls_batch_hooks(eager):
    batches = [_program([(0, 1), (2, 3)], [7, 18], seed=1), _program([(0, 1)], [5], seed=2)]
    network, layer = _network()
    model = NeuPSLModel({"Neural": network})
    model.compile(optimizer=keras.optimizers.Adam(0.05), run_eagerly=eager)
    seen = []
    hook = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(logs["loss"]))
    history = model.fit(ProgramData(batches, passes=2, seed=0), epochs=3, verbose=0, callbacks=[hook])
    assert len(seen) == 3 * 4  # 2 programs x 2 passes per epoch
    # One forward pass per step (the backward pass reuses it), plus fit's check of the networks on program 0.
    assert float(layer.calls.numpy()) == 3 * 4 + 1
    assert history.history["loss"][-1] < history.history["loss"][0]
    for bridge, _ in batches:
        bridge.close()


def test_standard_callbacks_early_stopping_terminate_on_nan_and_csv_logger(tmp_path):
    bridge, inputs = _program([(0, 1), (2, 3)], [7, 18])
    network, _ = _network(nan_from=7)  # NaN from the 8th call: fit's check on program 0 is the 1st, so step 7
    model = NeuPSLModel({"Neural": network})
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    log_file = tmp_path / "log.csv"
    callbacks = [
        keras.callbacks.EarlyStopping(monitor="loss", patience=50),
        keras.callbacks.TerminateOnNaN(),
        keras.callbacks.CSVLogger(str(log_file)),
    ]
    with pytest.warns(PslBridgeWarning, match="NaN or infinity"):  # a warning the user sees, not only a log line
        history = model.fit(
            ProgramData([(bridge, inputs)], passes=5, shuffle=False), epochs=4, verbose=0, callbacks=callbacks
        )
    bridge.close()
    # Epoch 0 ran its 5 steps, epoch 1 stopped at its 2nd (the 7th step): TerminateOnNaN acted on that batch.
    assert len(history.history["loss"]) == 2 and np.isnan(history.history["loss"][-1])
    rows = list(csv.DictReader(open(log_file)))
    assert [r["epoch"] for r in rows] == ["0", "1"] and float(rows[0]["loss"]) > 0


def test_the_tensorboard_callback_writes_its_logs(tmp_path):
    """The guide lists TensorBoard, which failed: the tf extra did not install tensorboard."""
    pytest.importorskip("tensorboard", reason="the tf extra installs tensorboard")
    bridge, inputs = _program([(0, 1)], [7])
    model = NeuPSLModel({"Neural": _network()[0]})
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    model.fit(ProgramData([(bridge, inputs)]), epochs=2, verbose=0, callbacks=[keras.callbacks.TensorBoard(tmp_path)])
    bridge.close()
    assert list((tmp_path / "train").glob("events.out.tfevents.*"))


def test_learned_rule_weights_flow_to_other_programs():
    bridge, inputs = _program([(0, 1), (2, 3)], [7, 18])
    network, _ = _network()
    model = NeuPSLModel({"Neural": network}, weights=WeightOptimizer(step_size=1.0))
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    model.fit(ProgramData([(bridge, inputs)]), epochs=2, verbose=0)
    learned = model.rule_weights
    assert learned is not None and not np.allclose(learned, learned[0])  # the weights moved
    with Bridge(add1_spec([(0, 1)])) as test:
        model.infer(test, {"Neural": inputs["Neural"][:2]})
        np.testing.assert_allclose(test.rule_weights, learned, rtol=1e-6)
    bridge.close()


def test_bad_training_data_is_refused():
    bridge, inputs = _program([(0, 1)], [3])
    with pytest.raises(ConfigurationError, match="inputs for Neural have 5 rows, not 2"):
        ProgramData([(bridge, {"Neural": np.zeros((5, FEATURES))})])
    with pytest.raises(ConfigurationError, match="exactly its neural predicates"):
        ProgramData([(bridge, {"Digit": inputs["Neural"]})])
    with pytest.raises(ConfigurationError, match="takes a ProgramData"):
        NeuPSLModel({"Neural": _network()[0]}).fit(np.zeros(3))
    bridge.close()


_LOAD = r"""
import json, numpy as np
from pslbridge.keras import load_neupsl
from pslbridge.examples.mnist_addition import digit_sum_rows, possible_digit_rows
predictor = load_neupsl("add1.neupsl")
data = json.load(open("data.json"))
observations = {"ImageSumBlock": data["pairs"], "DigitSum": digit_sum_rows(), "PossibleDigits": possible_digit_rows()}
inputs = {"Neural": np.asarray(data["inputs"], dtype=np.float32)}
result = predictor.predict(inputs, entities={"Neural": data["entities"]},
                           observations=observations, targets={"ImageSum": data["targets"]},
                           options={"admmreasoner.epsilonabs": "1e-8", "admmreasoner.epsilonrel": "1e-8"})
frame = result.to_frame("ImageSum")
print(json.dumps({"rows": frame[["arg0", "arg1", "arg2"]].astype(str).values.tolist(), "values": frame.value.tolist()}))
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_saved_model_predicts_on_new_data_in_a_fresh_process(tmp_path):
    bridge, inputs = _program([(0, 1), (2, 3)], [7, 18])
    network = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(10, activation="softmax")])
    model = NeuPSLModel({"Neural": network}, weights=WeightOptimizer())
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    model.fit(ProgramData([(bridge, inputs)]), epochs=3, verbose=0)
    model.save_neupsl(tmp_path / "add1.neupsl", bridge)
    bridge.close()
    pairs = [(10, 11), (12, 13)]  # new additions of new images
    new_inputs = np.random.default_rng(7).normal(size=(4, FEATURES)).astype(np.float32)
    tight = {"admmreasoner.epsilonabs": "1e-8", "admmreasoner.epsilonrel": "1e-8"}
    with Bridge(add1_spec(pairs, options=tight)) as fresh:
        expected = model.infer(fresh, {"Neural": new_inputs}, reset=True).to_frame("ImageSum")
    payload = {
        "inputs": new_inputs.tolist(),
        "entities": [10, 11, 12, 13],
        "pairs": [list(p) for p in pairs],
        "targets": [[a, b, z] for a, b in pairs for z in range(19)],
    }
    (tmp_path / "data.json").write_text(json.dumps(payload))
    proc = run_python(_LOAD, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = {tuple(r): v for r, v in zip(out["rows"], out["values"])}
    assert len(ours) == len(expected) == 38
    for row in expected.itertuples(index=False):
        assert ours[(str(row.arg0), str(row.arg1), str(row.arg2))] == pytest.approx(row.value, abs=1e-5)


def test_a_corrupt_or_foreign_artefact_is_refused(tmp_path):
    from pslbridge.errors import CheckpointError

    bad = tmp_path / "x.neupsl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="cannot read the saved model"):
        load_neupsl(bad)


def test_readme_keras_example_runs(tmp_path):
    """The README's Keras-native example (from_python, truth=, entity order, a separate evaluation program,
    save and load) runs as written and classifies the held-out nodes."""
    import re

    readme = (REPO / "README.md").read_text()
    section = readme.split("## Training with Keras", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    accuracy = float(re.search(r"held-out accuracy ([\d.]+)", proc.stdout).group(1))
    assert accuracy >= 0.8, proc.stdout  # untrained: ~1/3
    assert (tmp_path / "nodes.neupsl").is_file() and proc.stdout.count("\n") >= 6


def test_the_networks_regularisation_losses_join_psl_loss():
    """A network's ``kernel_regularizer`` is part of the step's loss, as in Keras' own fit: with plain SGD, one
    step moves the regularised weights by exactly ``-lr * 2c * w`` more than the same network without it (the
    predictions, hence PSL's gradient, are the same)."""
    bridge, inputs = _program([(0, 1), (2, 3)], [7, 18], seed=3)
    c, lr, moved = 0.5, 0.1, []
    for regularizer in (None, keras.regularizers.L2(c)):
        keras.utils.set_random_seed(0)
        dense = keras.layers.Dense(10, activation="softmax", kernel_regularizer=regularizer)
        network = keras.Sequential([keras.Input((FEATURES,)), dense])
        start = np.asarray(dense.kernel).copy()
        model = NeuPSLModel({"Neural": network})
        model.compile(optimizer=keras.optimizers.SGD(lr))
        history = model.fit(ProgramData([(bridge, inputs)]), epochs=1, verbose=0)
        moved.append((start, np.asarray(dense.kernel), history.history["loss"][0], history.history["energy"][0]))
    (start, plain, plain_loss, energy), (same_start, regularised, loss, same_energy) = moved
    np.testing.assert_array_equal(start, same_start)
    assert energy == pytest.approx(same_energy, rel=1e-6)
    np.testing.assert_allclose(regularised - plain, -lr * 2 * c * start, atol=1e-6)
    assert loss == pytest.approx(plain_loss + c * float(np.sum(start**2)), rel=1e-5)
    bridge.close()


def test_predict_and_program_data_refuse_rows_that_do_not_match_the_entities(tmp_path):
    """predict with 6 input rows for 3 entities used to ignore the extra rows, and fewer rows were a raw
    IndexError; both are NeuralInputErrors now. ProgramData takes (entity_ids, inputs) and puts them in order."""
    from pslbridge.errors import NeuralInputError
    from pslbridge.examples.mnist_addition import digit_sum_rows, possible_digit_rows

    bridge, inputs = _program([(0, 1), (2, 3)], [7, 18])
    network = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(10, activation="softmax")])
    model = NeuPSLModel({"Neural": network})
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    ids = bridge.entities("Neural")["arg0"].tolist()
    shuffled = ProgramData([(bridge, {"Neural": (ids[::-1], inputs["Neural"][::-1])})])
    np.testing.assert_array_equal(shuffled.inputs[0]["Neural"], inputs["Neural"])
    model.fit(ProgramData([(bridge, inputs)]), epochs=1, verbose=0)
    model.save_neupsl(tmp_path / "m.neupsl", bridge)
    bridge.close()
    predictor = load_neupsl(tmp_path / "m.neupsl")
    kwargs = {
        "observations": {
            "ImageSumBlock": [(10, 11)],
            "DigitSum": digit_sum_rows(),
            "PossibleDigits": possible_digit_rows(),
        },
        "targets": {"ImageSum": [(10, 11, z) for z in range(19)]},
    }
    features = np.random.default_rng(1).normal(size=(6, FEATURES)).astype(np.float32)
    for rows, says in [(6, "6 input rows for 2 entities"), (1, "1 input rows for 2 entities")]:
        with pytest.raises(NeuralInputError, match=says):
            predictor.predict({"Neural": features[:rows]}, entities={"Neural": [10, 11]}, **kwargs)
    both = predictor.predict({"Neural": features[:2]}, entities={"Neural": [10, 11]}, **kwargs)
    swapped = predictor.predict({"Neural": features[[1, 0]]}, entities={"Neural": [11, 10]}, **kwargs)
    np.testing.assert_allclose(swapped.to_frame("ImageSum").value, both.to_frame("ImageSum").value, atol=1e-5)


def test_learned_rule_weights_follow_their_rules_text_across_programs_that_list_them_in_another_order():
    """Two programs with the same rules in another order once moved each learned weight onto the wrong rule.

    Oracle: the same training with both programs listing the rules in one order learns the same weights.
    """
    from pslbridge import ModelSpec
    from pslbridge.errors import ConfigurationError

    def program(rules):
        spec = ModelSpec.from_python(
            rules=rules,
            predicates={"Neural": 2, "Label": 2},
            neural={"Neural": 2},
            targets={"Neural": [("a", 0), ("a", 1)], "Label": [("a", 0), ("a", 1)]},
            truth={"Label": [("a", 0, 1.0), ("a", 1, 0.0)]},
        )
        spec.phase = "learn"
        return Bridge(spec)

    rules = ["1: Neural(N, C) -> Label(N, C) ^2", "3: Label(N, C) -> Neural(N, C) ^2"]
    inputs = {"Neural": np.ones((1, FEATURES), dtype=np.float32)}
    start = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(2, activation="softmax")]).get_weights()

    def train(second_rules):
        one, two = program(rules), program(second_rules)
        network = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(2, activation="softmax")])
        network.set_weights(start)
        optimizer = WeightOptimizer(step_size=1.0, log_regularization=0.0, entropy_regularization=0.0)
        model = NeuPSLModel({"Neural": network}, weights=optimizer)
        model.compile(optimizer=keras.optimizers.SGD(0.1))
        model.fit(ProgramData([(one, inputs), (two, inputs)], passes=3, seed=0), epochs=2, verbose=0)
        model.infer(two, inputs)  # sets the learned weights on `two`, in its own order
        weights = (model.rule_weights.copy(), np.asarray(two.rule_weights))
        one.close(), two.close()
        return weights

    same, same_on_two = train(rules)
    reordered, reordered_on_two = train(rules[::-1])
    assert abs(same[0] - same[1]) > 1e-3  # the weights moved apart, so a swap would show
    np.testing.assert_allclose(reordered, same, atol=1e-6)
    np.testing.assert_allclose(reordered_on_two, same_on_two[::-1], atol=1e-6)

    one, other = program(rules), program(["1: Neural(N, C) -> Label(N, C) ^2"])
    model = NeuPSLModel(
        {"Neural": keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(2, activation="softmax")])},
        weights=WeightOptimizer(),
    )
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    with pytest.raises(ConfigurationError, match="program 1 has other weighted rules than the first program"):
        model.fit(ProgramData([(one, inputs), (other, inputs)]), epochs=1, verbose=0)
    frozen = NeuPSLModel({"Neural": model.networks["Neural"]})  # frozen weights: each program keeps its own
    frozen.compile(optimizer=keras.optimizers.Adam(0.05))
    frozen.fit(ProgramData([(one, inputs), (other, inputs)]), epochs=1, verbose=0)
    one.close(), other.close()


def test_saving_with_another_models_bridge_is_refused(tmp_path):
    """save_neupsl(path, bridge_of_another_model) saved and loaded, and predict then failed with a raw KeyError."""
    from pslbridge.errors import ConfigurationError

    network = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(10, activation="softmax")])
    model = NeuPSLModel({"Digit": network})
    with Bridge(add1_spec([(0, 1)])) as other:
        with pytest.raises(ConfigurationError, match=r"neural predicates \['Neural'\] are not this model's"):
            model.save_neupsl(tmp_path / "m.neupsl", other)
    assert not (tmp_path / "m.neupsl").exists()


def test_evaluate_and_validation_data_give_psls_loss_on_evaluation_programs_and_change_nothing():
    """model.evaluate(...) and fit(validation_data=...) failed with Keras' 'No loss to compute'.

    Oracle: learn_step on a fresh copy of the evaluation program at the network's inference-mode predictions.
    """
    train, train_inputs = _program([(0, 1), (2, 3)], [7, 18], seed=1)
    held, held_inputs = _program([(0, 1)], [5], seed=2)
    network = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(10, activation="softmax")])
    model = NeuPSLModel({"Neural": network}, weights=WeightOptimizer())
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(
        ProgramData([(train, train_inputs)], passes=2),
        epochs=2,
        verbose=0,
        validation_data=ProgramData([(held, held_inputs)]),
    )
    assert sorted(history.history) == ["energy", "loss", "val_energy", "val_loss"]
    assert len(history.history["val_loss"]) == 2
    weights, network_weights = model.rule_weights.copy(), [w.copy() for w in network.get_weights()]
    logs = model.evaluate(ProgramData([(held, held_inputs)]), verbose=0, return_dict=True)
    predictions = keras.ops.convert_to_numpy(network(held_inputs["Neural"], training=False))
    with Bridge(add1_spec([(0, 1)], sums=[5], phase="learn")) as fresh:
        fresh.rule_weights = model.learned.for_program(fresh.weighted_rules)
        expected = fresh.learn_step({"Neural": predictions})
    assert logs["loss"] == pytest.approx(expected.loss, rel=1e-5) and logs["energy"] == pytest.approx(expected.energy)
    np.testing.assert_array_equal(model.rule_weights, weights)  # no rule-weight step
    for before, after in zip(network_weights, network.get_weights()):
        np.testing.assert_array_equal(before, after)  # no network update
    train.close(), held.close()


def test_fit_and_evaluate_do_not_keep_their_program_data_alive():
    """Keras 3 on TensorFlow keeps every dataset given to fit or evaluate alive, so a loop of fit calls (one a
    round, as MNIST-Add-N's abduction rounds) kept a copy of every program's inputs per call (24 GB after 84 calls).

    Oracle: weak references to the calls' ProgramData; only the model's last training and evaluation data may
    remain, and training still sees every program.
    """
    import gc
    import weakref

    train, train_inputs = _program([(0, 1), (2, 3)], [7, 18], seed=1)
    held, held_inputs = _program([(0, 1)], [5], seed=2)
    network, layer = _network()
    model = NeuPSLModel({"Neural": network})
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    refs = []
    for _ in range(3):
        data, validation = ProgramData([(train, train_inputs)], passes=2), ProgramData([(held, held_inputs)])
        history = model.fit(data, epochs=2, verbose=0, validation_data=validation)
        assert len(history.history["loss"]) == 2 and len(history.history["val_loss"]) == 2
        evaluation = ProgramData([(held, held_inputs)])
        model.evaluate(evaluation, verbose=0)
        refs.append((weakref.ref(data), weakref.ref(validation), weakref.ref(evaluation)))
        del data, validation, evaluation
    gc.collect()
    assert [ref() is None for ref in refs[0] + refs[1]] == [True] * 6
    assert refs[2][0]() is model.data and refs[2][2]() is model.eval_data
    # per round: 2 epochs of 2 steps, 2 validation steps, 1 evaluation step, and the three preflight checks'
    # forward passes on program 0 (fit's training and validation data, evaluate's data)
    assert float(layer.calls.numpy()) == 3 * (2 * 2 + 2 + 1 + 3)
    train.close(), held.close()


def test_neupsl_model_says_what_keras_arguments_it_ignores_or_refuses(tmp_path):
    """compile(loss=, metrics=) and fit(batch_size=) were ignored without a word; validation_split and the whole-model
    save ended in Keras' errors or NotImplementedError."""
    from pslbridge.errors import ConfigurationError

    bridge, inputs = _program([(0, 1)], [7])
    network = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(10, activation="softmax")])
    model = NeuPSLModel({"Neural": network})
    with pytest.warns(PslBridgeWarning, match="loss, metrics ignored"):
        model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse", metrics=["accuracy"])
    data = ProgramData([(bridge, inputs)])
    with pytest.warns(PslBridgeWarning, match="batch_size ignored"):
        history = model.fit(data, epochs=1, verbose=0, batch_size=32)
    assert len(history.history["loss"]) == 1
    with pytest.raises(ConfigurationError, match="does not take validation_split"):
        model.fit(data, epochs=1, verbose=0, validation_split=0.2)
    with pytest.raises(ConfigurationError, match="validation_data must be a ProgramData"):
        model.fit(data, epochs=1, verbose=0, validation_data=(np.zeros(3), np.zeros(3)))
    with pytest.raises(ConfigurationError, match="evaluate takes a ProgramData"):
        model.evaluate(np.zeros((2, FEATURES)))
    with pytest.raises(ConfigurationError, match="save_neupsl"):
        model.save(tmp_path / "m.keras")
    checkpoint = keras.callbacks.ModelCheckpoint(str(tmp_path / "m.keras"))  # whole-model checkpoints call save
    with pytest.raises(ConfigurationError, match="save_neupsl"):
        model.fit(data, epochs=1, verbose=0, callbacks=[checkpoint])
    bridge.close()


def test_mistakes_before_the_first_step_are_pslbridges_own_errors_not_graph_errors():
    """A misspelt network key, a network returning a dict, loss='bogus', a bilevel loss on ADMM and a program
    closed before fit surfaced as 65-line TensorFlow graph errors."""
    from pslbridge.errors import ClosedError, ConfigurationError, NeuralInputError

    bridge, inputs = _program([(0, 1)], [7])
    dense = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(10, activation="softmax")])
    data = ProgramData([(bridge, inputs)])

    def fit(model):
        model.compile(optimizer=keras.optimizers.Adam(0.05))
        return model.fit(data, epochs=1, verbose=0)

    with pytest.raises(
        ConfigurationError, match=r"neural predicates are \['Neural'\], this model's networks \['Nueral'\]"
    ):
        fit(NeuPSLModel({"Nueral": dense}))
    inp = keras.Input((FEATURES,))
    as_dict = keras.Model(inp, {"digits": keras.layers.Dense(10, activation="softmax")(inp)})
    with pytest.raises(NeuralInputError, match="the network gives a dict"):
        fit(NeuPSLModel({"Neural": as_dict}))
    with pytest.raises(ConfigurationError, match="loss must be one of"):
        NeuPSLModel({"Neural": dense}, loss="bogus")
    with pytest.raises(ConfigurationError, match="ADMM|dual"):  # bce needs a dual-BCD reasoner
        fit(NeuPSLModel({"Neural": dense}, loss="bce"))
    fit(NeuPSLModel({"Neural": dense}))  # the program is still usable after each refusal
    bridge.close()
    with pytest.raises(ClosedError, match="closed"):
        fit(NeuPSLModel({"Neural": dense}))


def test_log_gradient_softmax_predicts_the_softmax_and_passes_back_the_gradient_in_log_probabilities(tmp_path):
    """Forward: the softmax. Backward: ``g - p * sum(g)``; for a loss linear in ``p`` that is cross-entropy's
    gradient through the plain softmax (Keras' own loss and autodiff), and for a squared loss the closed form."""
    from backend_probe import logit_step

    rng = np.random.default_rng(3)
    logits = (3 * rng.normal(size=(6, 10))).astype("float32")
    targets = np.eye(10, dtype="float32")[rng.integers(0, 10, size=6)]
    p = keras.ops.convert_to_numpy(keras.ops.softmax(logits))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(LogGradientSoftmax()(logits)), p, atol=1e-7, rtol=0)

    def linear(y, q):
        return 1.0 - keras.ops.sum(y * q, axis=-1)

    crossentropy = logit_step((keras.layers.Softmax(),), "categorical_crossentropy", logits, targets)
    np.testing.assert_allclose(logit_step((LogGradientSoftmax(),), linear, logits, targets), crossentropy, atol=1e-6)
    assert np.abs(crossentropy).max() > 0.05  # a gradient worth comparing
    plain = logit_step((keras.layers.Softmax(),), linear, logits, targets)
    assert np.abs(plain - crossentropy).max() > 0.05  # the plain softmax's differs

    def squared(y, q):
        return keras.ops.sum((q - y) ** 2, axis=-1)

    g = 2 * (p - targets) / len(p)  # d mean-over-rows loss / d p
    expected = g - p * g.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(logit_step((LogGradientSoftmax(),), squared, logits, targets), expected, atol=1e-6)

    net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(10), LogGradientSoftmax()])
    net.save(tmp_path / "net.keras")
    inputs = rng.normal(size=(3, 4)).astype("float32")
    loaded = keras.saving.load_model(tmp_path / "net.keras")
    assert isinstance(loaded.layers[-1], LogGradientSoftmax)
    np.testing.assert_allclose(loaded.predict(inputs, verbose=0), net.predict(inputs, verbose=0), atol=1e-7)


def test_lenet_with_log_gradient_predicts_as_the_papers_lenet_with_the_same_weights():
    from pslbridge.examples.mnist_addition import lenet

    plain, logged = lenet(), lenet(log_gradient=True)
    assert isinstance(logged.layers[-1], LogGradientSoftmax) and logged.layers[-1].is_active()
    assert len(plain.trainable_weights) == len(logged.trainable_weights)
    for mine, theirs in zip(logged.trainable_weights, plain.trainable_weights, strict=True):
        mine.assign(theirs)
    images = np.random.default_rng(4).random((5, 28, 28, 1)).astype("float32")
    np.testing.assert_allclose(logged.predict(images, verbose=0), plain.predict(images, verbose=0), atol=1e-6)


def test_log_gradient_softmax_switched_on_by_a_callback_changes_the_next_steps_gradient():
    """Epoch 0 inactive (the softmax's own gradient), switched on at epoch 1's start: each epoch's one SGD step
    (a loss linear in ``p``) is the closed-form gradient of that mode at that epoch's logits (the backend
    probe's check, here on this process's backend in the fast tier)."""
    from backend_probe import predictions, switched_softmax_steps

    found = switched_softmax_steps(predictions())
    assert np.abs(found["switched_expected"][0] - found["switched_expected"][1]).max() > 0.05
    np.testing.assert_allclose(found["switched_steps"], found["switched_expected"], atol=1e-5, rtol=0)
    layer = LogGradientSoftmax(active=False)
    assert LogGradientSoftmax.from_config(layer.get_config()).is_active() is False


def test_one_bridge_relabelled_per_batch_trains_as_the_programs_grounded_with_those_labels():
    """ProgramData's third item: one resident program, labels set before each batch's step. The oracle is one
    program grounded per batch: the same weights after the same steps."""
    pairs, sums = [(0, 1), (2, 3)], [[7, 18], [3, 9], [12, 0]]
    rng = np.random.default_rng(5)
    inputs = [{"Neural": rng.normal(size=(4, FEATURES)).astype(np.float32)} for _ in sums]
    grounded = [Bridge(add1_spec(pairs, sums=s, phase="learn")) for s in sums]
    resident = Bridge(add1_spec(pairs, sums=sums[0], phase="learn"))
    rows = resident.truth_rows("ImageSum")
    labels = [{"ImageSum": [float(int(r[2]) == s[int(r[0]) // 2]) for r in rows]} for s in sums]
    weights = []
    for batches in ([(b, x) for b, x in zip(grounded, inputs)], [(resident, x, y) for x, y in zip(inputs, labels)]):
        keras.utils.set_random_seed(3)
        network, _ = _network()
        model = NeuPSLModel({"Neural": network})
        model.compile(optimizer=keras.optimizers.SGD(0.5))
        history = model.fit(ProgramData(batches, seed=1), epochs=3, verbose=0)
        weights.append((network.get_weights(), history.history["loss"]))
    for want, got in zip(weights[0][0], weights[1][0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weights[1][1], weights[0][1], rtol=1e-5)
    assert weights[0][1][-1] < weights[0][1][0]  # it learned
    with pytest.raises(ConfigurationError, match=r"program 1: labels for ImageSum need one value per truth row"):
        ProgramData([(resident, inputs[0], labels[0]), (resident, inputs[1], {"ImageSum": [1.0]})])
    bad = {"ImageSum": np.where(np.arange(len(rows)) == 4, np.nan, 0.0)}
    with pytest.raises(ConfigurationError, match=r"program 1: labels for ImageSum: truth row 4 got nan"):
        ProgramData([(resident, inputs[0], labels[0]), (resident, inputs[1], bad)])
    with pytest.raises(ConfigurationError, match=r"program 0: labels for 'Nope': unknown predicate"):
        ProgramData([(resident, inputs[0], {"Nope": [1.0]})])
    for bridge in (*grounded, resident):
        bridge.close()
