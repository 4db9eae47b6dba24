"""Model loading: NeuPSL-style runtime configs, YAML, phases, neural predicates, reasoners."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from pslbridge import Bridge, ModelFileError, load_model
from pslbridge.model import ModelSpec

from conftest import EXAMPLES, MODELS

NEUPSL = MODELS / "mnist-addition" / "neupsl-style" / "mnist-add1.json"


def test_neupsl_config_loads_unchanged_per_phase():
    learn = load_model(NEUPSL, phase="learn")
    infer = load_model(NEUPSL, phase="infer")
    neural = learn.predicate("NeuralClassifier").neural
    assert neural.class_size == 10 and neural.entity_argument_indexes == [0]
    assert neural.options["model-path"] == "./mnist_classifier.py::MNISTAdditionModel"
    assert learn.options["admmreasoner.maxiterations"] == "500"
    assert infer.options["admmreasoner.maxiterations"] == "5000"
    assert learn.predicate("ImageSum").types == ["UniqueIntID"] * 3
    assert len(learn.tables("ImageSum", "targets")[0]) == 3 * 19
    assert len(infer.tables("ImageSum", "targets")[0]) == 2 * 19


def test_neupsl_config_grounds_with_entity_data_map(jvm_started):
    with Bridge(NEUPSL, phase="infer") as bridge:
        entities = bridge.entities("NeuralClassifier")
        assert entities["arg0"].tolist() == [str(i) for i in range(6, 10)]  # map rows that have atoms, in order
        features = bridge.features("NeuralClassifier")
        assert features.shape == (4, 4)
        expected = np.loadtxt(NEUPSL.parent / "data" / "entity-data-map.txt", dtype=np.float32)[6:, 1:]
        np.testing.assert_allclose(features, expected)
        probs = np.full((4, 10), 0.01, dtype=np.float32)
        probs[np.arange(4), [1, 2, 3, 4]] = 0.91
        result = bridge.infer({"NeuralClassifier": probs})
        frame = result.to_frame("ImageSum")
        best = frame.loc[frame.groupby("arg0")["value"].idxmax()]
        assert best["arg2"].tolist() == ["3", "7"]  # 1 + 2 and 3 + 4
        assert result.violated_constraints == 0


def test_yaml_config_equals_json(tmp_path, jvm_started):
    raw = json.loads(NEUPSL.read_text())
    (tmp_path / "data").symlink_to(NEUPSL.parent / "data")
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(raw))
    from_yaml = load_model(path, phase="learn")
    from_json = load_model(NEUPSL, phase="learn")
    assert [r.text for r in from_yaml.rules] == [r.text for r in from_json.rules]
    assert from_yaml.options == from_json.options
    with Bridge(from_yaml) as a, Bridge(from_json) as b:
        assert (a.atom_count, a.term_count) == (b.atom_count, b.term_count)


def test_deep_predicate_without_class_size_or_entity_arguments(tmp_path):
    raw = json.loads(NEUPSL.read_text())
    del raw["predicates"]["NeuralClassifier/2"]["options"]["class-size"]
    (tmp_path / "a.json").write_text(json.dumps(raw))
    with pytest.raises(ModelFileError, match="needs the option 'class-size'"):
        load_model(tmp_path / "a.json")
    raw = json.loads(NEUPSL.read_text())
    del raw["predicates"]["NeuralClassifier/2"]["options"]["entity-argument-indexes"]
    (tmp_path / "b.json").write_text(json.dumps(raw))
    with pytest.raises(ModelFileError, match="entity-argument-indexes"):
        load_model(tmp_path / "b.json")


def test_entity_data_map_with_ragged_rows(tmp_path, jvm_started):
    import shutil

    shutil.copytree(NEUPSL.parent, tmp_path / "m")
    path = tmp_path / "m" / "data" / "entity-data-map.txt"
    lines = path.read_text().splitlines()
    lines[3] = lines[3] + "\t0.5"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ModelFileError, match="ragged entity-data map") as info:
        Bridge(tmp_path / "m" / "mnist-add1.json")
    assert info.value.line == 4


def test_class_size_one_neural_predicate(jvm_started):
    spec = ModelSpec.from_python(
        rules=["1: Score(P, '0') -> Spam(P) ^2", "1: !Spam(P) ^2"],
        predicates={"Score": 2, "Spam": 1},
        neural={"Score": 1},
        targets={"Score": [("m1", "0"), ("m2", "0")], "Spam": [("m1",), ("m2",)]},
    )
    with Bridge(spec) as bridge:
        assert bridge.neural_shape("Score") == (2, 1)
        result = bridge.infer({"Score": np.array([0.9, 0.1])})  # 1-D is accepted for one class
        assert result["Spam"][0] > result["Spam"][1]
        np.testing.assert_allclose(result["Spam"], [0.45, 0.05], atol=1e-3)


def test_dualbcd_reasoner_is_selectable(jvm_started):
    spec = load_model(EXAMPLES / "simple-acquaintances" / "simple-acquaintances.json")
    with Bridge(spec) as admm, Bridge(spec, reasoner="dualbcd") as dual:
        a, d = admm.infer(), dual.infer()
    # A different algorithm with its own default tolerances: close, not equal.
    assert d.objective == pytest.approx(a.objective, rel=5e-2)
    np.testing.assert_allclose(d["Knows"], a["Knows"], atol=0.1)


def test_options_pass_through_to_the_reasoner(jvm_started):
    spec = load_model(EXAMPLES / "simple-acquaintances" / "simple-acquaintances.json")
    with Bridge(spec, options={"admmreasoner.maxiterations": 3}) as bridge:
        assert bridge.infer(reset=True).iterations <= 4


def test_data_file_with_unknown_section(tmp_path):
    data = tmp_path / "m.data"
    data.write_text("predicates:\n  A/1: closed\nobservation:\n  A: a.txt\n")
    (tmp_path / "m.psl").write_text("1: A(X) -> A(X) ^2\n")
    with pytest.raises(ModelFileError, match=r"unknown section\(s\) \['observation'\]") as info:
        load_model(tmp_path / "m.psl", data)
    assert info.value.line == 3


def test_empty_data_file_loads_no_rows_with_a_warning(tmp_path, caplog):
    """PSL reads an empty data file as no rows; pslbridge does the same and says so in the log."""
    (tmp_path / "a.txt").write_text("\n\n")
    (tmp_path / "m.psl").write_text("1: A(X) -> B(X) ^2\n")
    (tmp_path / "m.data").write_text("predicates:\n  A/1: closed\n  B/1: open\nobservations:\n  A: a.txt\n")
    with caplog.at_level("WARNING", logger="pslbridge.model"):
        spec = load_model(tmp_path / "m.psl", tmp_path / "m.data")
    assert len(spec.tables("A", "observations")[0]) == 0
    assert any("a.txt" in r.getMessage() and "empty" in r.getMessage() for r in caplog.records)


def test_unreadable_file(tmp_path):
    path = tmp_path / "m.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ModelFileError, match="cannot read file"):
        load_model(path)


def _acquaintances_copy(folder, rules_name="model.psl", data_name="model.data", bom=False):
    """The simple-acquaintances CLI pair copied into ``folder`` under the given names (data paths made absolute)."""
    import shutil

    source = EXAMPLES / "simple-acquaintances"
    rules = (source / "simple-acquaintances.psl").read_text()
    (folder / rules_name).write_text(("\ufeff" if bom else "") + rules, encoding="utf-8")
    shutil.copy(source / "simple-acquaintances.data", folder / data_name)
    for txt in (source / "data").glob("*"):
        (folder / "data").mkdir(exist_ok=True)
        shutil.copy(txt, folder / "data" / txt.name)
    return folder / rules_name


def test_a_byte_order_mark_at_the_start_of_a_rule_file_is_not_a_syntax_error(tmp_path):
    from pslbridge.model import load_model

    plain = load_model(_acquaintances_copy(tmp_path))
    (tmp_path / "bom").mkdir()
    marked = load_model(_acquaintances_copy(tmp_path / "bom", bom=True))
    assert [r.text for r in marked.rules] == [r.text for r in plain.rules]


def test_a_psl_file_pairs_with_the_data_file_of_its_name_and_never_silently_with_another(tmp_path):
    import warnings

    from pslbridge import ModelFileError, PslBridgeWarning
    from pslbridge.model import load_model

    rules = _acquaintances_copy(tmp_path)
    (tmp_path / "eval.data").write_text((tmp_path / "model.data").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_model(rules).rules) == 6  # model.data, although eval.data is there too
    (tmp_path / "model.data").unlink()
    with pytest.warns(PslBridgeWarning, match="using the folder's only .data file, eval.data"):
        load_model(rules)
    (tmp_path / "other.data").write_text("")
    with pytest.raises(ModelFileError, match=r"no model\.data beside it \(the folder has eval\.data, other\.data\)"):
        load_model(rules)


def test_data_given_as_a_file_with_a_runtime_config_says_it_must_be_a_folder(tmp_path):
    from pslbridge import ModelFileError
    from pslbridge.model import load_model

    config = EXAMPLES / "simple-acquaintances" / "simple-acquaintances.json"
    with pytest.raises(ModelFileError, match="is a file .a .data file goes with a .psl rule file"):
        load_model(config, EXAMPLES / "simple-acquaintances" / "simple-acquaintances.data")
