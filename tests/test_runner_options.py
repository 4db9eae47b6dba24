"""The MNIST-Add runner's learning options: weight averaging and data augmentation (shifts)."""

from __future__ import annotations

import csv
import os
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="TensorFlow is an optional extra (pip install pslbridge[tf])")

from experiments.mnist_add import runner as mnist_add_runner  # noqa: E402
from experiments.mnist_add.runner import Setting  # noqa: E402
from pslbridge.examples.mnist_addition import lenet  # noqa: E402
from pslbridge.training import set_seed  # noqa: E402

TINY = {"digits": 1, "additions": 20, "test_additions": 20, "val_additions": 20, "steps_per_epoch": 4}


def test_selection_keeps_the_averaged_network_and_training_the_raw_one(mnist, jvm_started):
    """Oracle: the moving average computed here from the raw weights after every step (Keras' ``use_ema``: the
    first step's weights, then ``m * average + (1 - m) * raw``). Two epochs of 4 steps: each epoch's selected
    weights are that epoch's average, and the second epoch's average still matches, so it trained on from the
    raw weights (had it stepped from the swapped-in average, the optimizer's average would hold the raw ones)."""
    import keras

    from experiments.mnist_add.runner import NeuPSLRun, split_data

    momentum = 0.5
    setting = Setting(**TINY, epochs=2, weight_average=momentum)
    run = NeuPSLRun(setting, 0, 3, split_data(setting, 0, 3, mnist[1], mnist[3]), mnist)
    raws, selected = [], []
    run.callbacks.append(
        keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: raws.append(run.model.get_weights()))
    )
    run.on_epoch = lambda epoch, logs: selected.append(run.model.get_weights())
    try:
        run.fit()
        assert len(raws) == 8 and len(selected) == 2
        average = raws[0]
        for step, raw in enumerate(raws[1:], start=1):
            average = [momentum * a + (1 - momentum) * r for a, r in zip(average, raw)]
            if step == 3:  # end of the first epoch
                for got, want in zip(selected[0], average):
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
        for got, want in zip(selected[1], average):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
        assert any(not np.allclose(a, r) for a, r in zip(average, raws[-1]))  # averaged, not the raw weights
    finally:
        run.close()


def test_weight_average_outside_zero_to_one_is_refused():
    from experiments.mnist_add.runner import network_optimizer

    with pytest.raises(ValueError, match="weight_average"):
        network_optimizer(Setting(weight_average=1.0))


@pytest.mark.slow
def test_add2_run_in_evaluation_blocks_validates_and_tests_as_one_program(mnist, jvm_started):
    """Oracle: the same MNIST-Add2 run evaluated as one program. The network is first fitted to the digit labels
    (most digits right, soft predictions), so the capped solves (150 iterations) stop unconverged and decode many
    sums but not all; in blocks of 3 additions (4 validation programs, 5 test programs) the validation scores and
    the test sums must be the same. The learning rate is too small to move the network, so both runs test the
    fitted network."""
    import keras

    from experiments.mnist_add.runner import NeuPSLRun, initial_network, split_data
    from pslbridge.examples.mnist_addition import prepare_images

    add2 = {"digits": 2, "additions": 12, "test_additions": 14, "val_additions": 10, "model": "neupsl"}
    caps = {"admm_iterations": 20, "eval_admm_iterations": 150, "test_admm_iterations": 150, "eval_reasoner": "admm"}
    setting = Setting(**add2, **caps, epochs=1, steps_per_epoch=1, batches=2, learning_rate=1e-9)
    fitted = initial_network(setting, 5, 0)
    fitted.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    fitted.fit(prepare_images(mnist[0][:3000]), mnist[1][:3000], epochs=2, batch_size=64, verbose=0)
    data = split_data(setting, 0, 5, mnist[1], mnist[3])
    rows = []
    for block in (0, 3):
        run = NeuPSLRun(replace(setting, eval_block=block), 0, 5, data, mnist)
        run.model.set_weights(fitted.get_weights())
        history = run.fit()
        assert len(run.val_programs.bridges) == (4 if block else 1) and len(run.test_programs.bridges) == (
            5 if block else 1
        )
        rows.append({**run.result(history), "val_place_sum_acc": history["val_place_sum_acc"]})
    whole, blocked = (
        {k: row[k] for k in ("sum_acc", "place_sum_acc", "val_score", "val_place_sum_acc")} for row in rows
    )
    assert blocked == whole
    # Informative but unconverged: many sums right, the Sum atoms behind the place sums, most digits right.
    assert 20 <= whole["sum_acc"] < whole["place_sum_acc"] < 100 and whole["val_place_sum_acc"][0] >= 0.2
    assert rows[0]["digit_acc"] > 60


@pytest.mark.slow
def test_add2_run_with_observed_labels_learns_from_smaller_training_programs(mnist, jvm_started):
    """``labels="observed"``: every training program grounds its sums as observations (fewer terms than the
    fixed-label programs of the same batches), validation and test programs still solve for the sums, and the
    steps learn (the energy falls over three epochs of a network not yet fitted)."""
    from experiments.mnist_add.runner import NeuPSLRun, split_data

    add2 = {"digits": 2, "additions": 12, "test_additions": 6, "val_additions": 6, "model": "neupsl"}
    setting = Setting(
        **add2,
        epochs=3,
        steps_per_epoch=2,
        batches=2,
        admm_iterations=50,
        eval_admm_iterations=50,
        eval_reasoner="admm",
        learning_rate=3e-3,
        labels="observed",
    )
    data = split_data(setting, 0, 5, mnist[1], mnist[3])
    fixed = NeuPSLRun(replace(setting, labels="fixed"), 0, 5, data, mnist)
    run = NeuPSLRun(setting, 0, 5, data, mnist)
    try:
        for ours, theirs in zip(run.train_bridges, fixed.train_bridges):
            assert ours.program.spec.observed_labels == ("Sum",) and theirs.program.spec.observed_labels == ()
            assert ours.program.term_count < theirs.program.term_count
        assert not any(b.program.spec.observed_labels for b in run.val_programs.bridges + run.test_programs.bridges)
        history = run.fit()
        assert np.isfinite(history["energy"]).all() and history["energy"][-1] < history["energy"][0]
        assert 0 <= run.result(history)["sum_acc"] <= 100
    finally:
        run.close()
        fixed.close()


def test_observed_labels_flag_and_its_loss_check(monkeypatch, tmp_path, capsys):
    """``--labels`` reaches the setting and its name; a bilevel loss with ``--labels observed`` is a usage error,
    and without the flag it gets fixed labels (observed is the Add2 default for the energy loss only)."""
    out = ["--out", str(tmp_path)]
    observed = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", "--labels", "observed", *out])
    fixed = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", "--labels", "fixed", *out])
    assert (observed.labels, fixed.labels) == ("observed", "fixed")
    assert "-obs" in observed.name and "-obs" not in fixed.name
    with pytest.raises(SystemExit) as exc:
        mnist_add_runner.main(["--labels", "observed", "--loss", "bce", "--reasoner", "dualbcd", *out])
    assert exc.value.code == 2 and "--labels fixed" in capsys.readouterr().err
    bilevel = _cli_setting(monkeypatch, ["--digits", "2", "--loss", "bce", "--reasoner", "dualbcd", *out])
    assert (bilevel.labels, bilevel.loss) == ("fixed", "bce")


def _moments(image) -> tuple[np.ndarray, np.ndarray]:
    """The centre ``(y, x)`` and the 2x2 covariance (rows and columns: y, x) of one image's pixel mass."""
    a = np.asarray(image)[0, :, :, 0]
    grid = np.stack(np.mgrid[0 : a.shape[0], 0 : a.shape[1]]).reshape(2, -1)
    weights = a.reshape(-1) / a.sum()
    centre = grid @ weights
    offsets = grid - centre[:, None]
    return centre, (offsets * weights) @ offsets.T


def test_shift_moves_training_images_and_leaves_inference_alone():
    """A 4x4 bright square: training calls move it by at most 10 % of 28 px along each axis (and do move it
    on some call); inference calls return the image unchanged, so predictions are deterministic."""
    set_seed(0)
    net = lenet(shift=0.1)
    shifter = net.layers[0]
    image = np.zeros((1, 28, 28, 1), np.float32)
    image[0, 12:16, 12:16, 0] = 1.0
    moves = [np.abs(_moments(shifter(image, training=True))[0] - _moments(image)[0]) for _ in range(20)]
    assert max(m.max() for m in moves) <= 0.1 * 28 + 0.5
    assert max(m.max() for m in moves) >= 1.0
    np.testing.assert_array_equal(np.asarray(shifter(image, training=False)), image)
    np.testing.assert_array_equal(np.asarray(net(image, training=False)), np.asarray(net(image, training=False)))
    plain = lenet()
    assert len(plain.layers) == len(net.layers) - 1
    with pytest.raises(ValueError, match="shift"):
        lenet(shift=1.0)


def test_rotation_and_zoom_turn_and_scale_training_images_and_leave_inference_alone():
    """A horizontal bar: with ``rotation=1/36`` training calls turn it by at most 10 degrees (and by more than 1 on
    some call); with ``zoom=0.1`` its length scales by a factor in [0.9, 1.1]. Inference calls return the image
    unchanged, and out-of-range values name the option."""
    set_seed(0)
    image = np.zeros((1, 28, 28, 1), np.float32)
    image[0, 13:15, 6:22, 0] = 1.0

    def angle(a):
        cov = _moments(a)[1]
        return abs(np.degrees(0.5 * np.arctan2(2 * cov[0, 1], cov[1, 1] - cov[0, 0])))

    def spread(a):
        return float(np.sqrt(_moments(a)[1][1, 1]))

    turner = lenet(rotation=1 / 36).layers[0]
    turns = [angle(turner(image, training=True)) for _ in range(20)]
    assert max(turns) <= 10.5 and max(turns) >= 1.0
    np.testing.assert_array_equal(np.asarray(turner(image, training=False)), image)
    zoomer = lenet(zoom=0.1).layers[0]
    scales = [spread(zoomer(image, training=True)) / spread(image) for _ in range(20)]
    assert 0.9 - 0.02 <= min(scales) and max(scales) <= 1.1 + 0.02
    assert max(abs(m - 1.0) for m in scales) >= 0.03
    np.testing.assert_array_equal(np.asarray(zoomer(image, training=False)), image)
    assert len(lenet(shift=0.1, rotation=0.02, zoom=0.1).layers) == len(lenet().layers) + 3
    for option, value in (("rotation", 0.5), ("zoom", 1.0), ("rotation", -0.1)):
        with pytest.raises(ValueError, match=option):
            lenet(**{option: value})


@pytest.mark.parametrize("option", ["--shift", "--weight-average"])
@pytest.mark.parametrize("value", ["1", "-0.1", "x"])
def test_out_of_range_options_are_usage_errors(option, value, capsys):
    with pytest.raises(SystemExit) as stop:
        mnist_add_runner.main([option, value])
    assert stop.value.code == 2
    assert "expected a number in [0, 1)" in capsys.readouterr().err


def test_cli_defaults_shift_for_small_add1_and_records_the_options(tmp_path, mnist, jvm_started):
    """Add1 under 1,000 additions gets the tuned shift by default; both options reach the recorded setting."""
    args = ["--additions", "20", "--test-additions", "20", "--val-additions", "20", "--epochs", "1"]
    args += ["--steps-per-epoch", "2", "--splits", "1", "--no-baseline", "--weight-average", "0.5"]
    assert mnist_add_runner.main([*args, "--out", str(tmp_path)]) == 0
    with open(tmp_path / "results.csv") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["setting"] == "add1-20-ema0.5-shift0.1"
    assert float(row["shift"]) == 0.1 and float(row["weight_average"]) == 0.5
    (whole,) = list(csv.DictReader(open(tmp_path / "wall-times.csv")))  # every invocation records its wall time
    assert whole["command"] == "mnist-add " + " ".join(args) and (whole["splits"], whole["ran"]) == ("0", "1")
    assert float(whole["wall_s"]) >= float(row["wall_s"]) and whole["workers"] == "one process, one run at a time"
    assert "## Whole runs" in (tmp_path / "results.md").read_text()
    assert mnist_add_runner.default_setting(1, 3000).shift == 0.0 == mnist_add_runner.default_setting(2, 150).shift


def _cli_setting(monkeypatch, argv: list[str]) -> Setting:
    """The Setting that ``mnist-add`` would run for ``argv`` (captured instead of training)."""
    captured = {}
    monkeypatch.setattr(mnist_add_runner, "run_setting", lambda setting, *a, **k: captured.update(s=setting) or [])
    monkeypatch.setattr(mnist_add_runner, "write_table", lambda out: "")
    assert mnist_add_runner.main(argv) == 0
    return captured["s"]


def test_add2_defaults_are_the_reproduction_schedules_and_flags_override_them(monkeypatch, tmp_path):
    """``mnist-add --digits 2`` with no schedule flags runs what ``make reproduce-mnist-add`` runs for that size (the
    authors' form and caps, 40 epochs of 15 batches x 5 passes at Adam 3e-3 with weight decay 0.1 and a running
    class prior for 150 additions, 20 epochs of 50 x 1 at 1e-3 without either for 1,500); a flag replaces only its
    own field; Add1 keeps its tuned defaults."""
    out = ["--out", str(tmp_path)]
    add2 = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", *out])
    assert add2 == mnist_add_runner.default_setting(2, 150)
    assert (add2.name, add2.epochs, add2.steps_per_epoch, add2.batches) == (
        "add2-150-neupsl-b15-obs-wd0.1-prior100m0.98-restart15at10x2-pat10to80-selbetter-temp1_0.25_0.1",
        40,
        5,
        15,
    )
    assert (add2.weight_decay, add2.class_prior, add2.class_prior_momentum) == (0.1, 100.0, 0.98)
    assert (add2.restart_below, add2.restart_epochs, add2.max_restarts, add2.restarts) == (15.0, 10, 2, True)
    assert (add2.admm_iterations, add2.eval_admm_iterations, add2.test_admm_iterations) == (100, 100, 1000)
    assert (add2.eval_reasoner, add2.shift, add2.test_additions, add2.learning_rate) == ("admm", 0.0, 250, 3e-3)
    assert add2.labels == "observed"
    assert (add2.select_on, add2.patience, add2.epoch_cap) == ("better", 10, 80)
    one_program = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", "--eval-block", "0", *out])
    assert (add2.eval_block, one_program.eval_block, one_program.name) == (25, 0, add2.name)
    big = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "1500", *out])
    assert (big.name, big.epochs, big.steps_per_epoch, big.batches) == (
        "add2-1500-neupsl-b50-obs-temp1_0.25_0.1",
        20,
        1,
        50,
    )
    assert (big.learning_rate, big.admm_iterations, big.eval_admm_iterations, big.test_admm_iterations) == (
        1e-3,
        50,
        100,
        1000,
    )
    assert (big.weight_decay, big.class_prior, big.restart_below, big.restarts, big.labels) == (
        0.0,
        0.0,
        0.0,
        False,
        "observed",
    )
    flags = ["--batches", "5", "--epochs", "3", "--learning-rate", "0.001", "--weight-decay", "0", "--class-prior", "0"]
    changed = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", *flags, *out])
    assert (changed.batches, changed.epochs, changed.steps_per_epoch, changed.learning_rate) == (5, 3, 5, 1e-3)
    assert (changed.weight_decay, changed.name) == (0.0, "add2-150-neupsl-b5-obs-pat10to6-selbetter-temp1_0.25_0.1")
    assert (big.select_on, big.patience, big.epoch_cap) == ("decoded", 0, 20)
    add1 = _cli_setting(monkeypatch, ["--additions", "300", *out])
    assert (add1.epochs, add1.steps_per_epoch, add1.batches, add1.shift, add1.learning_rate) == (125, 20, 1, 0.1, 1e-3)
    assert (add1.weight_decay, add1.class_prior, add1.restarts, add1.eval_block, add1.labels) == (
        0.0,
        0.0,
        False,
        0,
        "fixed",
    )
    assert (add1.model, add1.eval_reasoner, add1.admm_iterations, add1.eval_admm_iterations) == (
        "figure",
        "dualbcd",
        500,
        None,
    )


def test_reproduce_runs_the_four_sizes_defaults_longest_first_and_refuses_schedule_flags(monkeypatch, tmp_path, capsys):
    """``--reproduce`` (the make target): Add2-1500, Add2-150, Add1-3000, Add1-300 with their defaults, in that
    order, with the split, seed and baseline flags passed on; a schedule flag is a usage error naming it. The
    whole invocation's wall time goes to ``wall-times.csv`` with the runs it ran itself (a Ray resume runs only
    those not stored), and the results table shows it."""
    captured = {}

    def fake_run_settings(settings, splits, seed, out, baseline, first_split, ray):
        captured.update(settings=settings, args=(splits, seed, out, baseline, first_split, ray))
        # Two runs ran (NeuPSL and its CNN baseline are rows of one run); the other ten were stored.
        return [
            {"setting": settings[0].name, "split": 2, "method": "NeuPSL"},
            {"setting": settings[0].name, "split": 2, "method": "CNN"},
            {"setting": settings[3].name, "split": 4, "method": "NeuPSL", "error": "DataError: x"},
        ]

    monkeypatch.setattr(mnist_add_runner, "run_settings", fake_run_settings)
    real_write_table, tables = mnist_add_runner.write_table, []
    monkeypatch.setattr(mnist_add_runner, "write_table", lambda out: tables.append(out) or "")
    argv = [
        "--reproduce",
        "--splits",
        "3",
        "--first-split",
        "2",
        "--seed",
        "7",
        "--no-baseline",
        "--out",
        str(tmp_path),
    ]
    assert mnist_add_runner.main(argv) == 0
    sizes = [(2, 1500), (2, 150), (1, 3000), (1, 300)]
    assert captured["settings"] == [mnist_add_runner.default_setting(d, a) for d, a in sizes]
    assert captured["args"] == (3, 7, tmp_path, False, 2, None)
    assert tables == [tmp_path]
    (whole,) = list(csv.DictReader(open(tmp_path / "wall-times.csv")))
    assert (whole["command"], whole["seed"], whole["splits"], whole["runs"], whole["ran"]) == (
        "mnist-add --reproduce --splits 3 --first-split 2 --seed 7 --no-baseline",
        "7",
        "2-4",
        "12",
        "2",
    )
    assert whole["workers"] == "one process, one run at a time" and float(whole["wall_s"]) >= 0
    assert whole["machine"].startswith(f"{os.cpu_count()} CPUs")
    outcome = {"method": "NeuPSL", "sum_acc": 90.0, "learn_s": 1.0, "step_s": 0.1, "infer_s": 0.1, "wall_s": 2.0}
    mnist_add_runner.record_split(tmp_path, captured["settings"][3], 0, [outcome], 7)
    table = real_write_table(tmp_path)
    assert "## Whole runs" in table and "--no-baseline | 7 | 2-4 | 2 of 12 |" in table, table
    for flags in (["--epochs", "3"], ["--digits", "2"], ["--eval-block", "0", "--shift", "0.2"]):
        with pytest.raises(SystemExit) as exc:
            mnist_add_runner.main(["--reproduce", *flags, "--out", str(tmp_path)])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert all(flag in err for flag in flags if flag.startswith("--")), err


def test_search_takes_add2_with_the_runner_defaults_as_its_base(monkeypatch, tmp_path):
    from experiments import search

    captured = {}

    def fake_search(base, space, out, **kwargs):
        captured.update(base=base, space=space, kwargs=kwargs)
        (out / "search.md").parent.mkdir(parents=True, exist_ok=True)
        (out / "search.md").write_text("Chosen: {}\n")
        return {"chosen": {}}

    monkeypatch.setattr(search, "search", fake_search)
    argv = ["--digits", "2", "--additions", "150", "--space", "learning_rate=choice:0.001,0.003", "--samples", "2"]
    assert search.main([*argv, "--out", str(tmp_path)]) == 0
    assert captured["base"] == mnist_add_runner.default_setting(2, 150)
    assert captured["kwargs"]["seed"] == 100  # the tuning seed, never reported on
    assert captured["kwargs"]["grace_epochs"] == 8  # a fifth of Add2-150's 40 epochs (Add1's 125: 25)
    argv = ["--space", "learning_rate=choice:0.001", "--epochs", "7", "--out", str(tmp_path)]
    assert search.main(argv) == 0
    assert captured["base"] == replace(mnist_add_runner.default_setting(1, 300), epochs=7)
    # A search over the loss trains every trial with fixed labels (the bilevel losses need them as labels).
    argv = ["--digits", "2", "--additions", "150", "--space", "loss=choice:energy,bce", "--out", str(tmp_path)]
    assert search.main(argv) == 0
    assert captured["base"] == replace(mnist_add_runner.default_setting(2, 150), labels="fixed")
    with pytest.raises(ValueError, match="'bce' loss needs the sums as labels"):
        replace(mnist_add_runner.default_setting(2, 150), loss="bce")


def test_results_of_another_schedule_under_the_same_name_are_never_averaged_together(tmp_path):
    """A results folder holding an older default's rows (same setting name and seed, another learning rate or ADMM
    cap) shows each schedule on its own line with its own splits, instead of one mean over them."""
    from experiments.reporting import append_csv

    fields = ["setting", "split", "seed", "method", "sum_acc", "digits", "additions", "overlap", "wall_s"]
    fields += ["epochs", "steps_per_epoch", "batches", "admm_iterations", "learning_rate"]
    row = {"setting": "add2-150-neupsl-b15", "seed": 7, "method": "NeuPSL", "digits": 2, "additions": 150}
    row |= {"overlap": 0, "wall_s": 60.0, "epochs": 20, "steps_per_epoch": 5, "batches": 15}
    for split, (rate, cap, acc) in enumerate(
        [(1e-3, 100, 60.0), (1e-3, 100, 62.0), (3e-3, 100, 70.0), (1e-3, 50, 64.0)]
    ):
        values = {"split": split, "learning_rate": rate, "admm_iterations": cap, "sum_acc": acc}
        append_csv(tmp_path / "results.csv", {**row, **values}, fields)
    lines = [line for line in mnist_add_runner.write_table(tmp_path).splitlines() if line.startswith("| add2")]
    assert len(lines) == 3
    cells = sorted((line.split(" | ")[3], line.split(" | ")[4], line.split(" | ")[8]) for line in lines)
    assert cells == [
        ("1", "64.00 ± 0.00", "20 x 5 x 15 = 1500 steps (ADMM cap 50), Adam 0.001 constant"),
        ("1", "70.00 ± 0.00", "20 x 5 x 15 = 1500 steps (ADMM cap 100), Adam 0.003 constant"),
        ("2", "61.00 ± 1.41", "20 x 5 x 15 = 1500 steps (ADMM cap 100), Adam 0.001 constant"),
    ]


@pytest.mark.parametrize("runner", ["citation", "visual_sudoku"])
def test_citation_and_sudoku_tables_keep_other_hyper_parameters_on_their_own_line(tmp_path, runner):
    """Rows of one data set (or setting name), method and seed but another hyper-parameter get their own line,
    named by the fields that differ from the defaults, instead of one mean over both."""
    from dataclasses import asdict

    from experiments.citation import runner as citation_runner
    from experiments.reporting import append_csv
    from experiments.visual_sudoku import runner as visual_sudoku_runner

    module = citation_runner if runner == "citation" else visual_sudoku_runner
    defaults = asdict(
        citation_runner.CitationSetting() if runner == "citation" else visual_sudoku_runner.SudokuSetting()
    )
    changed, name_key = ("steps", "dataset") if runner == "citation" else ("epochs", "setting")
    metric = "test_acc" if runner == "citation" else "puzzle_acc"
    base = {name_key: "cora" if runner == "citation" else "vs-16", "seed": 7, "method": "NeuPSL", **defaults}
    extra = {"distinguish_acc": 90.0, "learn_s": 1.0, "infer_s": 0.1} if runner != "citation" else {}
    fields = [*base, *extra, "split", metric]
    for split, (value, acc) in enumerate([(defaults[changed], 80.0), (defaults[changed], 82.0), (100, 70.0)]):
        append_csv(tmp_path / "results.csv", {**base, **extra, "split": split, changed: value, metric: acc}, fields)
    lines = [line for line in module.write_table(tmp_path).splitlines() if line.startswith(f"| {base[name_key]} |")]
    cells = sorted((line.split(" | ")[2], line.split(" | ")[4], line.split(" | ")[5]) for line in lines)
    assert cells == [("defaults", "2", "81.00 ± 1.41"), (f"{changed} 100", "1", "70.00 ± 0.00")]


def test_weight_decay_shrinks_each_weight_by_rate_times_decay_and_reaches_the_setting(monkeypatch, capsys):
    """AdamW-style decay: with a zero gradient Adam's own step is 0, so only the decay moves the weight."""
    import keras

    optimizer = mnist_add_runner.network_optimizer(Setting(learning_rate=0.1, weight_decay=0.5))
    weight = keras.Variable(np.array([2.0, -4.0], dtype="float32"))
    optimizer.apply_gradients([(np.zeros(2, dtype="float32"), weight)])
    np.testing.assert_allclose(np.asarray(weight), [2.0 * (1 - 0.05), -4.0 * (1 - 0.05)], rtol=1e-6)
    plain = keras.Variable(np.array([2.0], dtype="float32"))
    mnist_add_runner.network_optimizer(Setting(learning_rate=0.1)).apply_gradients([(np.zeros(1, "float32"), plain)])
    assert float(np.asarray(plain)[0]) == 2.0
    setting = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", "--weight-decay", "0.01"])
    assert (
        setting.weight_decay == 0.01
        and setting.name
        == "add2-150-neupsl-b15-obs-wd0.01-prior100m0.98-restart15at10x2-pat10to80-selbetter-temp1_0.25_0.1"
    )
    with pytest.raises(SystemExit) as stop:
        mnist_add_runner.main(["--weight-decay", "-1"])
    assert stop.value.code == 2 and "expected a finite number >= 0" in capsys.readouterr().err


def test_class_prior_is_the_kl_from_uniform_and_reaches_the_network_and_setting(monkeypatch):
    """``--class-prior w`` puts a ClassBalance prior on LeNet's output: the network's loss after a forward pass is
    ``w * KL(uniform || batch mean)`` of its own predictions (computed here with numpy); 0 leaves the paper's
    network."""
    images = np.random.default_rng(0).random((8, 28, 28, 1)).astype("float32")
    net = lenet(class_prior=0.5)
    probs = np.asarray(net(images, training=True), dtype=np.float64)
    mean = probs.mean(axis=0)
    expected = 0.5 * np.sum(0.1 * (np.log(0.1) - np.log(mean + 1e-7)))
    assert float(sum(np.asarray(loss) for loss in net.losses)) == pytest.approx(expected, rel=1e-4)
    assert expected > 0
    plain = lenet()
    plain(images, training=True)
    assert not plain.losses
    setting = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", "--class-prior", "0.2"])
    assert (
        setting.class_prior == 0.2
        and setting.name
        == "add2-150-neupsl-b15-obs-wd0.1-prior0.2m0.98-restart15at10x2-pat10to80-selbetter-temp1_0.25_0.1"
    )


def test_class_prior_momentum_runs_over_batches_and_spares_a_balanced_network(monkeypatch):
    """With ``--class-prior-momentum b`` the prior's mean is the bias-corrected moving average of the batches'
    means (numpy oracle, three calls); only the current batch's share carries a gradient, which vanishes when the
    running mean is uniform even though the batch itself is not balanced (the batch prior's does not). Without a
    prior the momentum is 0 (name, results key), and a momentum given with no prior warns."""
    import tensorflow as tf

    from pslbridge.errors import ConfigurationError
    from pslbridge.keras import ClassBalance

    rng = np.random.default_rng(1)
    batches = [rng.dirichlet(np.ones(4), size=5).astype("float32") for _ in range(3)]
    prior = ClassBalance(2.0, momentum=0.8)
    raw = np.zeros(4)
    for t, batch in enumerate(batches, start=1):
        prior(batch, training=True)
        raw = 0.8 * raw + 0.2 * batch.mean(axis=0)
        corrected = raw / (1 - 0.8**t)
        expected = 2.0 * np.sum(0.25 * (np.log(0.25) - np.log(corrected + 1e-7)))
        assert float(np.asarray(prior.losses[-1])) == pytest.approx(expected, rel=1e-4)
    assert prior.running_mean() == pytest.approx(corrected, rel=1e-5)

    def logit_gradient(layer: ClassBalance, logits: np.ndarray) -> np.ndarray:
        variable = tf.Variable(logits)
        with tf.GradientTape() as tape:
            layer(tf.nn.softmax(variable), training=True)
            loss = layer.losses[-1]
        return tape.gradient(loss, variable).numpy()

    skewed = np.log(np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1]], dtype="float32"))  # mean (.4, .4, .1, .1)
    balanced = ClassBalance(2.0, momentum=0.9)
    balanced.build((None, 4))
    balanced.running.assign(np.full(4, 0.25 * (1 - 0.9**50), dtype="float32"))  # 50 balanced calls so far
    balanced.calls.assign(50.0)
    assert (
        np.abs(logit_gradient(balanced, skewed)).max() < 0.1 * np.abs(logit_gradient(ClassBalance(2.0), skewed)).max()
    )
    setting = _cli_setting(
        monkeypatch, ["--digits", "2", "--additions", "150", "--class-prior", "3", "--class-prior-momentum", "0.9"]
    )
    assert (
        setting.class_prior_momentum == 0.9
        and setting.name
        == "add2-150-neupsl-b15-obs-wd0.1-prior3m0.9-restart15at10x2-pat10to80-selbetter-temp1_0.25_0.1"
    )
    plain = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", "--class-prior", "0"])
    assert (plain.class_prior_momentum, plain.name) == (
        0.0,
        "add2-150-neupsl-b15-obs-wd0.1-restart15at10x2-pat10to80-selbetter-temp1_0.25_0.1",
    )  # no prior
    with pytest.warns(UserWarning, match="--class-prior-momentum has no effect"):
        _cli_setting(
            monkeypatch, ["--digits", "2", "--additions", "150", "--class-prior", "0", "--class-prior-momentum", "0.9"]
        )
    assert lenet(class_prior=1.0, prior_momentum=0.5).layers[-1].momentum == 0.5
    with pytest.raises(ConfigurationError, match="momentum must lie in"):
        ClassBalance(1.0, momentum=1.0)
    with pytest.raises(ConfigurationError, match="has not seen any predictions"):
        ClassBalance(1.0, momentum=0.5).running_mean()


@pytest.mark.slow
def test_a_slow_start_restarts_from_a_new_network_and_selection_spans_every_attempt(mnist, jvm_started):
    """Invariants of a restart: a run judged after 1 epoch against an unreachable 100 % restarts as often as allowed
    (each time from a new initialisation), trains the full schedule after the last restart, records every epoch
    it trained, and keeps the best validation epoch over all attempts; without a threshold nothing restarts."""
    from experiments.mnist_add.runner import NeuPSLRun, split_data

    setting = Setting(**TINY, epochs=3, restart_below=100, restart_epochs=1, max_restarts=2)
    data = split_data(setting, 0, 3, mnist[1], mnist[3])
    run = NeuPSLRun(setting, 0, 3, data, mnist)
    first = run.model.get_weights()
    starts = []
    run.on_epoch = lambda epoch, logs: starts.append(epoch)
    try:
        history = run.fit()
        assert run.restarts == 2 and starts == [0, 0, 0, 1, 2]  # 1 + 1 judged epochs, then the full 3
        assert len(history["val_sum_acc"]) == len(history["step_time"]) == len(history["psl_time"]) == 5
        assert run.best["score"] == max(history["val_sum_acc"])
        assert run.learn_time > 0
        retrained = NeuPSLRun(replace(setting, restart_below=0), 0, 3, data, mnist)
        assert all(np.array_equal(a, b) for a, b in zip(first, retrained.model.get_weights()))  # same first draw
        restarted = mnist_add_runner.initial_network(setting, 3, 0, restarts=1)
        assert not all(np.array_equal(a, b) for a, b in zip(first, restarted.get_weights()))
        history = retrained.fit()
        assert retrained.restarts == 0 and len(history["val_sum_acc"]) == 3
        epoch = retrained.best["epoch"]  # the selected epoch's decode and digit-composed accuracies are kept
        assert retrained.best["sum_acc"] == history["val_sum_acc"][epoch]
        assert retrained.best["digit_sum_acc"] == history["val_digit_sum_acc"][epoch]
        row = retrained.result(history)
        assert row["restarts"] == 0
    finally:
        run.close()


def test_restart_flags_reach_the_setting_and_a_restart_that_cannot_happen_warns(monkeypatch, tmp_path):
    """``--restart-below`` / ``--restart-epochs`` / ``--max-restarts`` replace Add2-150's defaults (and the name and
    the results' schedule say so); ``--restart-below 0`` turns restarts off; flags that cannot take effect warn."""
    add2, write_table = ["--digits", "2", "--additions", "150"], mnist_add_runner.write_table  # before the patch
    setting = _cli_setting(
        monkeypatch, [*add2, "--restart-below", "20", "--restart-epochs", "5", "--max-restarts", "1"]
    )
    assert (setting.restart_below, setting.restart_epochs, setting.max_restarts) == (20.0, 5, 1)
    assert setting.name.endswith("-prior100m0.98-restart20at5x1-pat10to80-selbetter-temp1_0.25_0.1")
    row = {"setting": setting.name, "split": 0, "seed": 31, "method": "NeuPSL", "sum_acc": 70.0, "wall_s": 60.0}
    mnist_add_runner.record_split(tmp_path, setting, 0, [{k: v for k, v in row.items() if k not in ("split", "seed")}])
    line = [line for line in write_table(tmp_path).splitlines() if line.startswith("| add2")][0]
    assert (
        "prior 100, class_prior_momentum 0.98, restart below 20 % after 5 epochs (at most 1), more epochs while "
        "improving (patience 10, up to 80), selected on the better of the decoded and the digit-composed "
        "validation sums, labels observed, decoding temperature chosen on validation from 1, 0.25, 0.1 |" in line
    )
    off = _cli_setting(monkeypatch, [*add2, "--restart-below", "0"])
    assert (off.restarts, off.name) == (
        False,
        "add2-150-neupsl-b15-obs-wd0.1-prior100m0.98-pat10to80-selbetter-temp1_0.25_0.1",
    )
    with pytest.warns(UserWarning, match="--restart-epochs / --max-restarts have no effect"):
        _cli_setting(monkeypatch, [*add2, "--restart-epochs", "40"])  # judged after the last epoch: never
    with pytest.warns(UserWarning, match="have no effect"):
        _cli_setting(monkeypatch, ["--additions", "300", "--max-restarts", "3"])  # Add1: no threshold


class _FixedNetwork:
    """Stands in for the LeNet: returns the given predictions for the validation or the test images."""

    def __init__(self, by_rows: dict[int, np.ndarray]) -> None:
        self.by_rows = by_rows

    def __call__(self, images, training=False):
        return self.by_rows[len(images)]

    def set_weights(self, weights) -> None:
        pass


def _soft(labels: np.ndarray, right: float) -> np.ndarray:
    probs = np.full((len(labels), 10), (1 - right) / 9, np.float32)
    probs[np.arange(len(labels)), labels] = right
    return probs


@pytest.mark.slow
def test_decoding_temperature_is_chosen_on_validation_and_the_test_decodes_at_it(mnist, jvm_started):
    """Oracle: each candidate's validation sum accuracy from its own fresh programs at the test cap. Soft but right
    predictions (every digit's true class at 0.3) decode few MNIST-Add2 sums at temperature 1 (the ``Sum`` atoms
    stay flat) and all of them sharpened, so the run picks the sharpest candidate that scores best and tests at it;
    peaked predictions decode the same at every temperature, and the first candidate (1) wins the tie."""
    from experiments.mnist_add.runner import EvalPrograms, NeuPSLRun, sharpen, split_data

    add2 = {"digits": 2, "additions": 12, "test_additions": 10, "val_additions": 12, "model": "neupsl"}
    caps = {"admm_iterations": 20, "eval_admm_iterations": 100, "test_admm_iterations": 300, "eval_reasoner": "admm"}
    setting = Setting(**add2, **caps, epochs=1, steps_per_epoch=1, decode_temperatures=(1.0, 0.5, 0.1))
    assert setting.name.endswith("-temp1_0.5_0.1")
    data = split_data(setting, 0, 5, mnist[1], mnist[3])
    _, val, test = data
    run = NeuPSLRun(setting, 0, 5, data, mnist)
    y = mnist[3]
    soft = {len(val.image_ids): _soft(y[val.image_ids], 0.3), len(test.image_ids): _soft(y[test.image_ids], 0.3)}
    try:
        oracle = {}
        for temperature in setting.decode_temperatures:
            programs = EvalPrograms(val, setting, 300)
            sums = programs.predict(sharpen(soft[len(val.image_ids)], temperature))["sum"]
            programs.close()
            oracle[temperature] = float((sums == val.sums).mean())
        assert oracle[1.0] < 0.5 and oracle[0.1] == 1.0  # the case the choice is for
        best = max(oracle.values())
        run.model, run.learn_time = _FixedNetwork(soft), 0.0
        # The selected epoch's validation decoded every sum its digits give, or all but one (of 12): no solves.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mnist_add_runner, "EvalPrograms", None)  # a solve would fail
            for decoded, composed in ((9, 9), (10, 11)):
                run.best.update(sum_acc=decoded / 12, digit_sum_acc=composed / 12)
                assert run.choose_temperature() == 1.0
        run.best.update(sum_acc=9 / 12, digit_sum_acc=11 / 12)  # two short: the candidates are solved
        chosen = run.choose_temperature()
        assert chosen == next(t for t in setting.decode_temperatures if oracle[t] == best) != 1.0
        row = run.result({"step_time": [0.0], "psl_time": [0.0]})
        assert row["decode_temperature"] == chosen and row["temperature_s"] > 0
        assert row["sum_acc"] == 100.0 and row["digit_acc"] == 100.0  # tested sharpened; argmax unchanged
        peaked = NeuPSLRun(setting, 0, 5, data, mnist)
        peaked.model = _FixedNetwork({n: _soft(p.argmax(1), 0.991) for n, p in soft.items()})
        assert peaked.choose_temperature() == 1.0
        peaked.close()
        single = NeuPSLRun(replace(setting, decode_temperatures=(1.0,)), 0, 5, data, mnist)
        single.model, single.learn_time = _FixedNetwork(soft), 0.0
        row = single.result({"step_time": [0.0], "psl_time": [0.0]})
        assert row["decode_temperature"] == 1.0 and row["sum_acc"] == 100 * oracle[1.0]
    finally:
        run.close()


def test_decode_temperatures_flag_reaches_the_setting_and_bad_values_are_usage_errors(monkeypatch, tmp_path, capsys):
    out = ["--out", str(tmp_path)]
    setting = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", "--decode-temperatures", "1,0.5", *out])
    assert setting.decode_temperatures == (1.0, 0.5) and setting.name.endswith("-temp1_0.5")
    assert _cli_setting(monkeypatch, ["--additions", "300", *out]).decode_temperatures == (1.0,)
    with pytest.raises(SystemExit):
        mnist_add_runner.main(["--decode-temperatures", "1,-2", *out])
    assert "expected comma-separated numbers > 0, got '1,-2'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="decode_temperatures must be positive"):
        Setting(decode_temperatures=())
    assert Setting(decode_temperatures=[1, 0.25]).decode_temperatures == (1.0, 0.25)  # a sweep's JSON list


def test_visual_sudoku_records_each_invocations_wall_time_and_the_runs_it_ran(monkeypatch, tmp_path):
    """``visual-sudoku`` appends one ``wall-times.csv`` row per invocation (the command without ``--out``, the
    splits, how many it ran) and its results table shows them under "Whole runs", as ``make
    reproduce-visual-sudoku``'s two invocations do."""
    from dataclasses import asdict

    from experiments.visual_sudoku import runner as visual_sudoku_runner

    def fake_split_rows(setting, split, seed, baselines):
        row = {"setting": setting.name, "split": split, "seed": seed, "method": "NeuPSL", "puzzle_acc": 50.0}
        row.update(distinguish_acc=60.0, learn_s=1.0, infer_s=0.1, **asdict(setting))
        return [row]

    monkeypatch.setattr(visual_sudoku_runner, "split_rows", fake_split_rows)
    out = ["--out", str(tmp_path)]
    assert visual_sudoku_runner.main(["--puzzles", "4", "--splits", "2", "--seed", "3", "--no-baselines", *out]) == 0
    assert visual_sudoku_runner.main(["--puzzles", "4", "--splits", "1", f"--out={tmp_path}"]) == 0
    first, second = list(csv.DictReader(open(tmp_path / "wall-times.csv")))
    assert (first["command"], first["seed"], first["splits"], first["runs"], first["ran"]) == (
        "visual-sudoku --puzzles 4 --splits 2 --seed 3 --no-baselines",
        "3",
        "0-1",
        "2",
        "2",
    )
    assert (second["command"], second["splits"], second["ran"]) == ("visual-sudoku --puzzles 4 --splits 1", "0", "1")
    table = (tmp_path / "results.md").read_text()
    assert "## Whole runs" in table and "| visual-sudoku --puzzles 4 --splits 1 | 0 | 0 | 1 of 1 |" in table, table


@pytest.mark.slow
def test_patience_trains_the_last_start_past_epochs_only_while_it_improves(mnist, jvm_started):
    """Scripted validation scores (the training is real): a start that still improves at ``epochs`` goes on until
    it has not risen for ``patience`` epochs; one that stopped improving earlier ends at ``epochs`` exactly as
    without patience; one that always improves ends at the cap. A restarted start's epochs do not count: patience
    is judged on the last start's own scores."""
    from experiments.mnist_add.runner import NeuPSLRun, split_data

    def trained(setting: Setting, scores: list[float]) -> list[int]:
        data = split_data(setting, 0, 3, mnist[1], mnist[3])
        run = NeuPSLRun(setting, 0, 3, data, mnist)
        script = iter(scores)
        run.evaluate = lambda: dict.fromkeys(("val_sum_acc", "val_digit_acc", "val_digit_sum_acc"), next(script))
        epochs: list[int] = []
        run.on_epoch = lambda epoch, logs: epochs.append(epoch)
        try:
            history = run.fit()
        finally:
            run.close()
        assert len(history["val_sum_acc"]) == len(history["step_time"]) == len(epochs)
        assert run.trained_epochs == epochs[-1] + 1
        return epochs

    patient = Setting(**TINY, epochs=3, patience=2, max_epochs=8)
    assert trained(patient, [0.1, 0.2, 0.3, 0.4, 0.4, 0.4, 0.4, 0.4]) == [0, 1, 2, 3, 4, 5]  # best 3, stop 3 + 2
    assert trained(patient, [0.5, 0.5, 0.5, 0.9]) == [0, 1, 2]  # no better since epoch 0: stops at epochs
    assert trained(patient, [0.1 * k for k in range(8)]) == list(range(8))  # always better: the cap
    restarted = replace(patient, restart_below=50, restart_epochs=1, max_restarts=1)
    # The first start (0.4 < 50 %) is restarted; the second's best is its epoch 2, though under the first's 0.4.
    assert trained(restarted, [0.4, 0.1, 0.2, 0.3, 0.3, 0.3, 0.3]) == [0, 0, 1, 2, 3, 4]


def test_patience_flags_reach_the_setting_its_name_and_schedule_and_bad_values_are_usage_errors(
    monkeypatch, tmp_path, capsys
):
    out = ["--out", str(tmp_path)]
    setting = _cli_setting(monkeypatch, ["--digits", "2", "--additions", "150", "--patience", "10", *out])
    assert (setting.patience, setting.max_epochs, setting.epoch_cap) == (10, 0, 80)
    assert "-pat10to80-" in setting.name and setting.name.endswith("-temp1_0.25_0.1")
    setting = _cli_setting(monkeypatch, ["--epochs", "5", "--patience", "3", "--max-epochs", "9", *out])
    assert setting.epoch_cap == 9 and setting.name.endswith("-pat3to9")
    row = {k: str(v) for k, v in vars(setting).items()}
    assert "more epochs while improving (patience 3, up to 9)" in mnist_add_runner._schedule(row, "NeuPSL")
    assert "while improving" not in mnist_add_runner._schedule({**row, "patience": "0"}, "NeuPSL")
    assert _cli_setting(monkeypatch, ["--additions", "300", *out]).epoch_cap == Setting(epochs=125).epochs
    with pytest.warns(UserWarning, match="--max-epochs has no effect without --patience"):
        _cli_setting(monkeypatch, ["--max-epochs", "300", *out])
    add2 = ["--digits", "2", "--additions", "150", *out]
    assert _cli_setting(monkeypatch, [*add2, "--max-epochs", "60"]).epoch_cap == 60  # Add2-150's default patience
    unpatient = _cli_setting(monkeypatch, [*add2, "--patience", "0"])
    assert (unpatient.patience, unpatient.epoch_cap) == (0, 40) and "-pat" not in unpatient.name
    with pytest.raises(SystemExit) as exc:
        mnist_add_runner.main(["--epochs", "5", "--patience", "3", "--max-epochs", "4", *out])
    assert exc.value.code == 2 and "max_epochs (4) must be at least epochs (5)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        mnist_add_runner.main(["--reproduce", "--patience", "3", *out])
    assert exc.value.code == 2 and "--patience" in capsys.readouterr().err
    with pytest.raises(ValueError, match="patience and max_epochs must be >= 0"):
        Setting(patience=-1)


@pytest.mark.slow
def test_select_on_better_judges_restarts_and_selection_on_the_better_of_decoded_and_composed(mnist, jvm_started):
    """Scripted validation scores (the training is real): with ``select_on="better"`` a start whose decoded sums
    are slow but whose digits compose the sums well is not restarted, and selection keeps the epoch where the
    better of the two scores is highest; ``"decoded"`` (the default) judges the decoded sums alone."""
    from experiments.mnist_add.runner import NeuPSLRun, split_data

    # (decoded, composed) per epoch, in the order the epochs are evaluated.
    script = [(0.4, 0.6), (0.5, 0.9), (0.6, 0.6), (0.7, 0.7)]

    def selected(select_on: str) -> tuple[int, int, float]:
        setting = Setting(**TINY, epochs=3, restart_below=50, restart_epochs=1, max_restarts=1, select_on=select_on)
        run = NeuPSLRun(setting, 0, 3, split_data(setting, 0, 3, mnist[1], mnist[3]), mnist)
        scores = iter(script)

        def evaluate() -> dict[str, float]:
            decoded, composed = next(scores)
            return {"val_sum_acc": decoded, "val_digit_acc": composed, "val_digit_sum_acc": composed}

        run.evaluate = evaluate
        try:
            run.fit()
        finally:
            run.close()
        return run.restarts, run.best["epoch"], run.best["score"]

    # Decoded: 40 % < 50 % after one epoch, so a restart; the second start's decoded sums peak at its epoch 2.
    assert selected("decoded") == (1, 2, 0.7)
    # Better: 60 % after one epoch, no restart; the composed 90 % of epoch 1 is the best epoch.
    assert selected("better") == (0, 1, 0.9)


def test_select_on_flag_reaches_the_setting_its_name_and_schedule(monkeypatch, tmp_path, capsys):
    out = ["--out", str(tmp_path)]
    setting = _cli_setting(monkeypatch, ["--select-on", "better", *out])
    assert setting.select_on == "better" and setting.name == "add1-300-shift0.1-selbetter"
    assert _cli_setting(monkeypatch, ["--additions", "300", *out]).select_on == "decoded"
    add2 = ["--digits", "2", "--additions", "150", *out]
    assert _cli_setting(monkeypatch, [*add2, "--select-on", "decoded"]).name.endswith("-pat10to80-temp1_0.25_0.1")
    row = {k: str(v) for k, v in vars(setting).items()}
    assert "selected on the better of the decoded" in mnist_add_runner._schedule(row, "NeuPSL")
    assert "selected on" not in mnist_add_runner._schedule({**row, "select_on": "decoded"}, "NeuPSL")
    with pytest.raises(SystemExit) as exc:
        mnist_add_runner.main(["--select-on", "digits", *out])
    assert exc.value.code == 2 and "invalid choice: 'digits'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="select_on must be 'decoded' or 'better', not 'digits'"):
        Setting(select_on="digits")


def test_validate_split_reports_the_best_validation_epoch_of_its_own_logs(mnist, jvm_started):
    """``validate_split`` (the search's trial) trains one split on validation only: its score and epoch are the
    best of the per-epoch validation scores it reported (ties: the later epoch, as selection keeps), and it says
    how many epochs the start trained."""
    from experiments.mnist_add.runner import validate_split

    scores: list[float] = []
    setting = Setting(**TINY, epochs=3)
    report = validate_split(setting, 0, 3, on_epoch=lambda epoch, logs: scores.append(logs["val_score"]))
    assert len(scores) == 3 and report["trained_epochs"] == 3 and report["restarts"] == 0
    best = max(scores)
    assert report["val_score"] == pytest.approx(100 * best)
    assert report["best_epoch"] == max(epoch for epoch, score in enumerate(scores) if score == best)


def test_the_presets_give_exactly_the_defaults_the_size_branches_gave():
    """The MNIST-Addition defaults moved from code (functions branching on digits and additions < 1,000) to preset
    files; at every size around the thresholds the preset-built setting equals the old defaults field for field,
    and its name (what results rows are keyed by) is unchanged. The reference is the old code's output."""
    import dataclasses
    import json

    from conftest import REPO

    reference = json.loads((REPO / "tests" / "data" / "mnist_add_defaults.json").read_text())
    for key, expected in reference.items():
        digits, additions = map(int, key.split("-"))
        setting = mnist_add_runner.default_setting(digits, additions)
        got = {f.name: getattr(setting, f.name) for f in dataclasses.fields(setting)}
        got["decode_temperatures"] = list(got["decode_temperatures"])
        assert {**got, "name": setting.name} == expected, key


def test_a_preset_that_sets_an_unknown_field_or_lacks_notes_is_refused(tmp_path):
    from experiments.presets import load_presets
    from pslbridge.errors import ConfigurationError

    (tmp_path / "bad.yaml").write_text("name: bad\nmatch: {digits: 1}\nnotes: tried\nfields: {epochs: 3, speed: 9}\n")
    with pytest.raises(ConfigurationError, match=r"bad.yaml: unknown field\(s\) \['speed'\]"):
        load_presets(tmp_path, allowed={"epochs"})
    (tmp_path / "bad.yaml").write_text("name: bad\nmatch: {digits: 1}\nnotes: ''\nfields: {epochs: 3}\n")
    with pytest.raises(ConfigurationError, match="notes"):
        load_presets(tmp_path, allowed={"epochs"})
