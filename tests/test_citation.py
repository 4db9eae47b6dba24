"""Planetoid loader, splits, feature propagation, and a short real NeuPSL run on Cora."""

from __future__ import annotations

import csv
from dataclasses import replace

import numpy as np
import pytest

from pslbridge.datasets.mnist import DataError
from pslbridge.datasets.planetoid import default_dir, load_planetoid, make_split, propagate_features

needs_data = pytest.mark.skipif(
    not (default_dir() / "SHA256SUMS").is_file(), reason=f"Planetoid files not found at {default_dir()}"
)


@needs_data
@pytest.mark.parametrize(
    ("name", "nodes", "features", "classes", "edges", "unlabelled"),
    [("cora", 2708, 1433, 7, 10556, 0), ("citeseer", 3327, 3703, 6, 9104, 15)],
)
def test_loader_counts_match_the_data_readme(name, nodes, features, classes, edges, unlabelled):
    graph = load_planetoid(name)
    assert graph.features.shape == (nodes, features)
    assert graph.n_classes == classes and int((graph.labels < 0).sum()) == unlabelled
    assert graph.edges.shape == (edges, 2)
    assert not (graph.edges[:, 0] == graph.edges[:, 1]).any()
    pairs = set(map(tuple, graph.edges.tolist()))
    assert all((b, a) in pairs for a, b in list(pairs)[:500])
    assert set(np.unique(graph.features).tolist()) <= {0.0, 1.0}


@needs_data
def test_checksum_mismatch_is_refused(tmp_path):
    import shutil

    for path in default_dir().iterdir():
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "ind.cora.graph").chmod(0o644)
    with open(tmp_path / "ind.cora.graph", "ab") as handle:
        handle.write(b"x")
    with pytest.raises(DataError, match="SHA-256"):
        load_planetoid("cora", tmp_path)
    with pytest.raises(DataError, match="unknown data set"):
        load_planetoid("pubmed", tmp_path)


def test_split_sizes_disjointness_and_seeds():
    labels = np.arange(3000) % 6
    labels[:10] = -1
    a, b, c = make_split(labels, 4), make_split(labels, 4), make_split(labels, 5)
    assert (len(a.train), len(a.val), len(a.test)) == (150, 150, 1000)
    parts = [set(x.tolist()) for x in (a.train, a.val, a.test, a.unlabelled)]
    assert sum(map(len, parts)) == 3000 and len(set.union(*parts)) == 3000
    assert not set(range(10)) & (parts[0] | parts[1] | parts[2])  # unlabelled nodes are never drawn
    assert set(labels[a.train].tolist()) == set(range(6))
    np.testing.assert_array_equal(a.train, b.train)
    assert not np.array_equal(a.train, c.train)


def test_feature_propagation_matches_dense_reference():
    rng = np.random.default_rng(0)
    n = 12
    upper = np.triu(rng.random((n, n)) < 0.3, 1)
    adjacency = (upper | upper.T).astype(float)
    edges = np.argwhere(adjacency > 0)
    x = rng.random((n, 5)).astype(np.float32)
    a_hat = adjacency + np.eye(n)
    d = np.diag(1 / np.sqrt(a_hat.sum(axis=1)))
    s = d @ a_hat @ d
    np.testing.assert_allclose(propagate_features(x, edges, hops=2), s @ s @ x, rtol=1e-5)
    np.testing.assert_allclose(propagate_features(x, edges, hops=0), x)


@needs_data
@pytest.mark.slow
def test_short_neupsl_run_on_cora_beats_the_untrained_network(jvm_started):
    """Untrained network ≈ chance (1/7 ≈ 14 %); a few pre-training epochs plus three joint steps of
    NeuPSL-LP reached 70 %+ here, so requiring 30 points above the untrained network is a safe margin."""
    pytest.importorskip("tensorflow")
    from experiments.citation.model import dense_classifier, normalise_rows
    from experiments.citation.runner import CitationSetting, run_neupsl

    graph = load_planetoid("cora")
    split = make_split(graph.labels, 0)
    x = normalise_rows(graph.features)
    untrained = dense_classifier(x.shape[1], graph.n_classes, 1.0, 5e-6)
    base = 100 * float((np.asarray(untrained(x)).argmax(1)[split.test] == graph.labels[split.test]).mean())
    setting = CitationSetting(pretrain_epochs=15, steps=3, admm_iterations=50)
    result = run_neupsl("NeuPSL-LP", x, graph, split, setting, jvm_start=0.0)
    assert base < 30
    assert result["test_acc"] >= base + 30
    assert result["infer_warm_s"] < result["infer_cold_s"]


@pytest.mark.slow
@needs_data
def test_cli_hyper_parameters_reach_the_recorded_setting(tmp_path, jvm_started):
    """Every CitationSetting field has a flag; the values are recorded with each result row, and the table names
    the fields that differ from the defaults (a run without flags is "defaults", tuple fields included)."""
    from dataclasses import fields

    from experiments.citation import runner as citation_runner

    flags = ["--l2", "5e-7", "--learning-rate", "1.5", "--weight-step", "1e-3", "--admm-iterations", "1000"]
    flags += ["--neural-step", "0.02", "--pretrain-epochs", "7", "--steps", "9", "--hops", "3"]
    flags += ["--initial-neural-weights", "0.2", "0.9", "--pretrain-monitor", "val_loss", "--balance-selection", "loss"]
    flags += ["--hidden", "16", "--ensemble", "2", "--self-train", "4"]
    assert {f.name.replace("_", "-") for f in fields(citation_runner.CitationSetting)} == {
        flag[2:] for flag in flags if flag.startswith("--")
    }
    args = ["--datasets", "cora", "--splits", "1", "--methods", "lp_psl", "--out", str(tmp_path)]
    with pytest.warns(UserWarning, match="--hops has no effect without --methods lp\\+fp"):
        assert citation_runner.main([*args, *flags]) == 0
    assert citation_runner.main(args) == 0
    with open(tmp_path / "results.csv") as handle:
        row, default_row = list(csv.DictReader(handle))
    recorded = {k: float(row[k]) for k in ("l2", "learning_rate", "weight_step", "neural_step")}
    assert recorded == {"l2": 5e-7, "learning_rate": 1.5, "weight_step": 1e-3, "neural_step": 0.02}
    assert (row["admm_iterations"], row["pretrain_epochs"], row["steps"], row["hops"]) == ("1000", "7", "9", "3")
    assert row["initial_neural_weights"] == "[0.2, 0.9]"
    assert (row["pretrain_monitor"], row["balance_selection"], row["hidden"]) == ("val_loss", "loss", "16")
    assert (row["ensemble"], default_row["ensemble"]) == ("2", "1")
    assert (row["self_train"], default_row["self_train"]) == ("4", "0")
    assert (default_row["hops"], default_row["l2"]) == ("2", "5e-06")  # lp_psl rows record NeuPSL-LP's defaults
    first, second = list(csv.DictReader(open(tmp_path / "wall-times.csv")))  # one row per invocation
    assert first["command"] == "citation --datasets cora --splits 1 --methods lp_psl " + " ".join(flags)
    assert second["command"] == "citation --datasets cora --splits 1 --methods lp_psl"
    assert (second["splits"], second["runs"], second["ran"]) == ("0", "1", "1") and float(second["wall_s"]) > 0
    assert "## Whole runs" in (tmp_path / "results.md").read_text()
    table = (tmp_path / "results.md").read_text().splitlines()[4:]
    options = sorted(line.split(" | ")[2] for line in table if line.startswith("| cora |"))
    assert options[0] == "defaults" and "hops 3" in options[1] and "initial_neural_weights [0.2, 0.9]" in options[1]
    for bad in (
        ["--l2", "-1"],
        ["--initial-neural-weights", "1"],
        ["--hops", "0"],
        ["--pretrain-monitor", "loss"],
        ["--hidden", "-1"],
        ["--ensemble", "0"],
        ["--self-train", "-1"],
    ):
        with pytest.raises(SystemExit) as stop:
            citation_runner.main(bad)
        assert stop.value.code == 2


def test_defaults_are_per_data_set_and_method_and_the_table_names_departures_from_them(tmp_path):
    """LP+FP on Cora runs its own defaults (more hops, less L2, the wider initial grid, self-training); NeuPSL-LP
    runs the plain setting. A results line says "defaults" for the row's own data set and method, and names what
    differs."""
    from dataclasses import asdict, replace

    from experiments.citation.runner import CitationSetting, default_setting, write_table
    from experiments.reporting import append_csv

    cora_fp, citeseer_fp = default_setting("cora", "lp+fp"), default_setting("citeseer", "lp+fp")
    assert default_setting("cora", "lp") == default_setting("citeseer", "lp") == CitationSetting()
    assert (cora_fp.hops, cora_fp.l2, citeseer_fp.hops, citeseer_fp.l2) == (6, 5e-7, 2, CitationSetting().l2)
    assert (cora_fp.hidden, cora_fp.learning_rate, citeseer_fp.hidden) == (128, 0.1, 0)
    assert (cora_fp.self_train, citeseer_fp.self_train, CitationSetting().self_train) == (20, 0, 0)
    for fp in (cora_fp, citeseer_fp):
        assert (fp.pretrain_monitor, fp.balance_selection) == ("val_loss", "loss")
    assert set(CitationSetting().initial_neural_weights) < set(citeseer_fp.initial_neural_weights)
    rows = [
        ("cora", "NeuPSL-LP+FP", cora_fp),
        ("cora", "NeuPSL-LP", CitationSetting()),
        ("citeseer", "NeuPSL-LP+FP", replace(citeseer_fp, hops=3)),
    ]
    for dataset, method, setting in rows:
        row = {"dataset": dataset, "method": method, "seed": 7, "split": 0, "test_acc": 80.0, **asdict(setting)}
        row["initial_neural_weights"] = list(setting.initial_neural_weights)  # as the runner writes it: JSON
        append_csv(tmp_path / "results.csv", row, list(row))
    text = write_table(tmp_path)
    assert "seed 100" in text  # where the defaults were chosen
    lines = [line.split(" | ") for line in text.splitlines()[4:] if line.startswith("| ")]
    assert sorted((cells[0][2:], cells[1], cells[2]) for cells in lines) == [
        ("citeseer", "NeuPSL-LP+FP", "hops 3"),
        ("cora", "NeuPSL-LP", "defaults"),
        ("cora", "NeuPSL-LP+FP", "defaults"),
    ]


def _toy_citation():
    """Twenty nodes in two classes told apart by their features, linked two apart: labels, features, graph, split."""
    from pslbridge.datasets.planetoid import Graph, Split

    labels = np.array([0, 1] * 10)
    x = np.eye(2, dtype=np.float32)[labels] * 0.6 + 0.2
    edges = np.array([[i, j] for i in range(20) for j in (i - 2, i + 2) if 0 <= j < 20])
    graph = Graph("toy", x, labels, edges, np.arange(0))
    return labels, x, graph, Split(np.arange(0, 8), np.arange(8, 12), np.arange(12, 20), np.arange(0))


@pytest.mark.slow
def test_hidden_layer_setting_reaches_the_network_run_neupsl_trains(jvm_started, monkeypatch):
    """``CitationSetting.hidden`` is the width of a ReLU layer in the network that run_neupsl pre-trains and
    learns jointly (0: the paper's single softmax layer), ``ensemble`` how many such networks it pre-trains, and
    the network (or their average) learns the toy graph."""
    pytest.importorskip("tensorflow")
    from experiments.citation import runner as citation_runner

    built = []
    original = citation_runner.dense_classifier

    def recording(*args, **kwargs):
        built.append(original(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(citation_runner, "dense_classifier", recording)
    labels, x, graph, split = _toy_citation()
    for hidden, widths, ensemble in ((8, [8, 2], 1), (0, [2], 1), (8, [8, 2], 3)):
        setting = citation_runner.CitationSetting(
            pretrain_epochs=20,
            steps=2,
            admm_iterations=50,
            hidden=hidden,
            learning_rate=0.1 if hidden else 1.0,
            ensemble=ensemble,
        )
        before = len(built)
        row = citation_runner.run_neupsl("NeuPSL-LP+FP", x, graph, split, setting, jvm_start=0.0)
        assert len(built) - before == ensemble  # one network per member
        assert [layer.units for layer in built[-1].layers] == widths
        assert [layer.activation.__name__ for layer in built[-1].layers][:-1] == ["relu"] * (len(widths) - 1)
        assert row["test_acc"] == 100.0


@pytest.mark.slow
def test_self_training_pre_trains_again_on_the_programs_confident_labels(jvm_started, monkeypatch):
    """``CitationSetting.self_train`` = k: after the balance pick, the program's MAP labels of k nodes per class
    outside the training and validation nodes join the training labels of a second, fresh network."""
    pytest.importorskip("tensorflow")
    from experiments.citation import runner as citation_runner

    fits, picks = [], []
    original_classifier, original_pick = citation_runner.dense_classifier, citation_runner.pseudo_labels

    def recording_classifier(*args, **kwargs):
        model = original_classifier(*args, **kwargs)
        fit = model.fit

        def recording_fit(x, y, **fit_kwargs):
            fits.append(np.asarray(y).copy())
            return fit(x, y, **fit_kwargs)

        model.fit = recording_fit
        return model

    def recording_pick(*args, **kwargs):
        picks.append(original_pick(*args, **kwargs))
        return picks[-1]

    monkeypatch.setattr(citation_runner, "dense_classifier", recording_classifier)
    monkeypatch.setattr(citation_runner, "pseudo_labels", recording_pick)
    labels, x, graph, split = _toy_citation()
    base = citation_runner.CitationSetting(pretrain_epochs=20, steps=2, admm_iterations=50)
    row = citation_runner.run_neupsl("NeuPSL-LP", x, graph, split, base, jvm_start=0.0)
    assert len(fits) == 1 and not picks and row["test_acc"] == 100.0
    fits.clear()
    row = citation_runner.run_neupsl("NeuPSL-LP", x, graph, split, replace(base, self_train=3), jvm_start=0.0)
    assert len(fits) == 2 and len(picks) == 1 and row["test_acc"] == 100.0
    nodes, classes = picks[0]
    assert len(nodes) == 6 and sorted(classes.tolist()) == [0, 0, 0, 1, 1, 1]
    assert not set(nodes.tolist()) & set(np.concatenate([split.train, split.val]).tolist())
    np.testing.assert_array_equal(classes, labels[nodes])  # the toy program labels them right
    np.testing.assert_array_equal(fits[0], labels[split.train])
    np.testing.assert_array_equal(fits[1], np.concatenate([labels[split.train], classes]))


def test_the_presets_give_exactly_the_defaults_the_branches_gave():
    """Citation's defaults moved from code (branches on method and data set) to preset files; for every data set
    and method the preset-built setting equals the old defaults field for field (the old code's output)."""
    import dataclasses
    import json

    from experiments.citation import runner

    from conftest import REPO

    reference = json.loads((REPO / "tests" / "data" / "citation_defaults.json").read_text())
    for key, expected in reference.items():
        dataset, method = key.split("-", 1)
        got = json.loads(json.dumps(dataclasses.asdict(runner.default_setting(dataset, method))))
        assert got == expected, key
