"""Every bad input gives a typed error naming what is at fault; the process stays usable."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pslbridge import Bridge, ClosedError, ModelFileError, NeuralInputError, load_model
from pslbridge.errors import ConfigurationError, EngineError
from pslbridge.examples.mnist_addition import add1_spec
from pslbridge.model import ModelSpec

from conftest import EXAMPLES, MODELS

pytestmark = pytest.mark.usefixtures("jvm_started")

SA = EXAMPLES / "simple-acquaintances"


@pytest.fixture
def sa_copy(tmp_path):
    shutil.copytree(SA, tmp_path / "sa")
    return tmp_path / "sa"


def _still_usable():
    """After any failure the same process builds and runs a new program."""
    with Bridge(load_model(SA / "simple-acquaintances.json")) as bridge:
        assert bridge.infer().violated_constraints == 0


def test_malformed_rule_names_file_line_and_position(sa_copy):
    rules = sa_copy / "simple-acquaintances.psl"
    lines = rules.read_text().splitlines()
    lines[3] = "20: Lived(P1, L & Lived(P2, L) -> Knows(P1, P2) ^2"
    rules.write_text("\n".join(lines) + "\n")
    with pytest.raises(ModelFileError) as info:
        Bridge(sa_copy / "simple-acquaintances.json")
    err = info.value
    assert err.path.endswith("simple-acquaintances.psl") and err.line == 4
    assert "syntax error" in str(err) and "column" in str(err) and "Lived(P1, L & Lived" in str(err)
    _still_usable()


def test_unknown_predicate_in_rule():
    with pytest.raises(ModelFileError, match="unknown predicate 'Frend'.*declares: A, B"):
        ModelSpec.from_python(rules=["1: Frend(X) -> B(X) ^2"], predicates={"A": 1, "B": 1})
        Bridge(ModelSpec.from_python(rules=["1: Frend(X) -> B(X) ^2"], predicates={"A": 1, "B": 1}))


def test_unknown_predicate_in_rule_at_grounding():
    spec = ModelSpec.from_python(rules=["1: Frend(X) -> B(X) ^2"], predicates={"A": 1, "B": 1}, targets={"B": [("x",)]})
    with pytest.raises(ModelFileError, match="unknown predicate 'Frend'"):
        Bridge(spec)
    _still_usable()


def test_arity_mismatch_in_rule():
    spec = ModelSpec.from_python(rules=["1: A(X, Y) -> B(X) ^2"], predicates={"A": 1, "B": 1}, targets={"B": [("x",)]})
    with pytest.raises(ModelFileError, match="A takes 1 argument.*gives 2") as info:
        Bridge(spec)
    assert info.value.predicate == "A"


def test_wrong_column_count_names_file_and_line(sa_copy):
    path = sa_copy / "data" / "lived_obs.txt"
    lines = path.read_text().splitlines()
    lines[4] = "eve\tparis\textra\tcolumns"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ModelFileError) as info:
        Bridge(sa_copy / "simple-acquaintances.json")
    assert info.value.line == 5 and info.value.path == "data/lived_obs.txt"
    assert "expected 2 TAB-separated columns" in str(info.value)


def test_non_numeric_truth_value_names_file_and_line(sa_copy):
    path = sa_copy / "data" / "knows_obs.txt"
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rsplit("\t", 1)[0] + "\tyes"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ModelFileError, match="'yes'.*not a number") as info:
        Bridge(sa_copy / "simple-acquaintances.psl", sa_copy / "simple-acquaintances.data")
    assert info.value.line == 3


def test_out_of_range_truth_value(sa_copy):
    path = sa_copy / "data" / "likes_obs.txt"
    path.write_text(path.read_text().replace("\t0.", "\t1.", 1))
    with pytest.raises(ModelFileError, match=r"outside \[0, 1\]") as info:
        Bridge(sa_copy / "simple-acquaintances.json")
    assert info.value.line == 1


def test_missing_data_file_reports_written_and_resolved_path(sa_copy):
    (sa_copy / "data" / "lived_obs.txt").unlink()
    with pytest.raises(ModelFileError) as info:
        Bridge(sa_copy / "simple-acquaintances.json")
    message = str(info.value)
    assert "data/lived_obs.txt" in message and str(sa_copy / "data" / "lived_obs.txt") in message


def test_target_atoms_missing_for_grounding():
    spec = ModelSpec.from_python(
        rules=["1: Link(A, B) & Cat(A) -> Cat(B) ^2"],
        predicates={"Link": 2, "Cat": 1},
        observations={"Link": [("a", "b"), ("b", "c")]},
        targets={"Cat": [("a",), ("b",)]},
    )
    with pytest.raises(ModelFileError, match=r"needs target atom\(s\) \[CAT\('c'\)\]"):
        Bridge(spec)
    _still_usable()


def test_duplicate_atoms_across_partitions(sa_copy):
    path = sa_copy / "data" / "knows_targets.txt"
    first_obs = (sa_copy / "data" / "knows_obs.txt").read_text().splitlines()[0].rsplit("\t", 1)[0]
    path.write_text(path.read_text() + first_obs + "\n")
    with pytest.raises(ModelFileError, match="appears twice") as info:
        Bridge(sa_copy / "simple-acquaintances.json")
    assert info.value.predicate == "Knows"
    assert info.value.line == len(path.read_text().splitlines())  # the repeat, and where the atom came first
    assert "in targets here and in observations at" in str(info.value)
    assert "knows_obs.txt:1;" in str(info.value)


def test_closed_predicate_with_targets(sa_copy):
    data = sa_copy / "simple-acquaintances.data"
    data.write_text(data.read_text().replace("Knows/2: open", "Knows/2: closed"))
    with pytest.raises(ModelFileError, match="declared closed but has target rows"):
        Bridge(sa_copy / "simple-acquaintances.psl", data)


def test_runtime_config_unknown_key_and_wrong_type(sa_copy):
    config = sa_copy / "simple-acquaintances.json"
    raw = json.loads(config.read_text())
    raw["predicate"] = {}
    config.write_text(json.dumps(raw))
    with pytest.raises(ModelFileError, match=r"unknown top-level key\(s\) \['predicate'\]"):
        Bridge(config)
    del raw["predicate"]
    raw["predicates"]["Lived/2"]["observations"] = 5
    config.write_text(json.dumps(raw))
    with pytest.raises(ModelFileError, match="Lived observations must be a list"):
        Bridge(config)


def test_infer_after_close_raises_and_new_bridge_works():
    bridge = Bridge(SA / "simple-acquaintances.json")
    bridge.close()
    bridge.close()  # idempotent
    with pytest.raises(ClosedError):
        bridge.infer()
    with pytest.raises(ClosedError):
        _ = bridge.rule_weights
    _still_usable()


def test_predicate_clash_between_open_programs_and_release_on_close():
    first = Bridge.from_python(
        rules=["1: Clash(X) -> Other(X) ^2"],
        predicates={"Clash": 1, "Other": 1},
        observations={"Clash": [("x",)]},
        targets={"Other": [("x",)]},
    )
    second_model = dict(
        rules=["1: Clash(X, Y) -> Other(X) ^2"],
        predicates={"Clash": 2, "Other": 1},
        observations={"Clash": [("x", "y")]},
        targets={"Other": [("x",)]},
    )
    with pytest.raises(ModelFileError, match="clashes with standard predicate CLASH"):
        Bridge.from_python(**second_model)
    first.infer()  # the failed build left the open program intact
    first.close()
    # Closed programs release their predicates: the name may now be declared with another arity.
    with Bridge.from_python(**second_model) as second:
        assert second.infer()["Other"].shape == (1,)
    _still_usable()


def test_bad_rule_weights():
    with Bridge(SA / "simple-acquaintances.json") as bridge:
        with pytest.raises(ConfigurationError, match="expected 5 rule weights"):
            bridge.rule_weights = [1.0]
        with pytest.raises(ConfigurationError, match="non-negative"):
            bridge.rule_weights = [-1.0, 1, 1, 1, 1]
        bridge.rule_weights = [2.0, 1, 1, 1, 1]
        np.testing.assert_allclose(bridge.rule_weights, [2, 1, 1, 1, 1])


@pytest.fixture(scope="module")
def add1():
    bridge = Bridge(add1_spec([(0, 1), (2, 3)]))
    yield bridge
    bridge.close()


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.full((4, 9), 0.1), r"expected shape \(4, 10\)"),
        (np.full((3, 10), 0.1), r"expected shape \(4, 10\)"),
        (np.full((4, 10), np.nan), "finite"),
        (np.full((4, 10), np.inf), "finite"),
        (np.full((4, 10), 1.5), r"\[0, 1\]"),
        (np.full((4, 10), -0.2), r"\[0, 1\]"),
        (np.full((4, 10), "a"), "numeric"),
        ("probabilities", "expected an array"),
        (np.full((4, 10), 0.1 + 0.1j), "real"),
    ],
)
def test_bad_neural_arrays(add1, value, match):
    add1.push({"Neural": np.full((4, 10), 0.1, dtype=np.float32)})
    before = add1.program.atom_values()
    with pytest.raises(NeuralInputError, match=match) as info:
        add1.infer({"Neural": value})
    assert info.value.predicate == "Neural"
    # Nothing crossed: every atom value is what it was.
    np.testing.assert_array_equal(add1.program.atom_values(), before)


def test_wrong_neural_predicate_name(add1):
    with pytest.raises(NeuralInputError, match="neural predicates: \\['Neural'\\]"):
        add1.infer({"Nural": np.full((4, 10), 0.1)})
    with pytest.raises(NeuralInputError, match="not a neural predicate"):
        add1.infer({"ImageSum": np.full((4, 10), 0.1)})


def test_missing_neural_values_on_first_infer():
    with Bridge(add1_spec([(0, 1)])) as bridge:
        with pytest.raises(NeuralInputError, match="no predictions were given yet"):
            bridge.infer()


def test_neural_dataframe_is_aligned_by_entity(add1):
    import pandas as pd

    probs = np.random.default_rng(0).dirichlet(np.ones(10), size=4).astype(np.float32)
    ordered = add1.infer({"Neural": probs})
    frame = pd.DataFrame(probs, index=add1.entities("Neural")["arg0"], columns=add1.classes("Neural"))
    shuffled = frame.iloc[[2, 0, 3, 1]]
    again = add1.infer({"Neural": shuffled})
    np.testing.assert_allclose(again["ImageSum"], ordered["ImageSum"], atol=1e-4)


def test_engine_error_keeps_java_class_and_trace():
    spec = ModelSpec.from_python(
        rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1}, observations={"A": [("x",)]}, targets={"B": [("x",)]}
    )
    with pytest.raises(EngineError, match='NumberFormatException: For input string: "not-a-number"') as info:
        Bridge(spec, options={"admmreasoner.maxiterations": "not-a-number"})
    assert info.value.java_class == "java.lang.NumberFormatException"
    assert "at org.linqs.psl" in info.value.java_trace
    assert isinstance(info.value.__cause__, Exception)  # the Java exception stays reachable
    _still_usable()


# --- rule syntax of every kind, from a .psl file (path, line, position in the message) ---------------

RULE_CASES = [
    ("logical", "1: A(X) & -> C(X) ^2", r"syntax error at column 11 near '->'"),
    ("arithmetic", "1: A(X) + * C(X) = 1 ^2", r"near '\*'"),
    ("summation", "1: A(+X) + >= 1 ^2", r"near '>='"),
    ("selection clause", "1: A(+X) >= 1 ^2 {X: }", r"near '}'"),
    ("missing weight or period", "A(X) -> C(X)", r"ended early: a soft rule starts with 'weight:'"),
    ("bad exponent", "1: A(X) -> C(X) ^3", r"near '\^'"),
    ("unbalanced parenthesis", "1: A(X -> C(X) ^2", r"near '->'"),
    ("negative weight", "-1: A(X) -> C(X) ^2", r"negative weight -1"),
    ("missing head", "1: A(X) -> ^2", r"near '\^2'"),
    ("unsafe variable", "1: A(X) -> C(Y) ^2", r"Any variable used in a negated"),
    ("unknown filter variable", "1: A(+X) >= 1 ^2 {Y: C(Y)}", r"Unknown variable \(Y\)"),
]


@pytest.mark.parametrize(("kind", "rule", "match"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_malformed_rules_of_every_kind(tmp_path, kind, rule, match):
    (tmp_path / "m.psl").write_text(f"# model\n1: A(X) -> C(X) ^2\n{rule}\n")
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "c.txt").write_text("x\n")
    (tmp_path / "m.data").write_text(
        "predicates:\n  A/1: closed\n  C/1: open\nobservations:\n  A: a.txt\ntargets:\n  C: c.txt\n"
    )
    with pytest.raises(ModelFileError, match=match) as info:
        Bridge(tmp_path / "m.psl", tmp_path / "m.data")
    assert info.value.path == str(tmp_path / "m.psl") and info.value.line == 3
    assert info.value.rule == rule and rule in str(info.value)


def test_integer_id_column_with_text(tmp_path):
    spec_rows = {"A": [("x",)]}
    with pytest.raises(ModelFileError, match="argument 1 of A must be an integer"):
        ModelSpec.from_python(
            rules=["1: A(X) -> C(X) ^2"],
            predicates={"A": ["UniqueIntID"], "C": ["UniqueIntID"]},
            observations=spec_rows,
            targets={"C": [("1",)]},
        )


def test_empty_argument_in_data_file(tmp_path):
    (tmp_path / "m.psl").write_text("1: B(X, Y, Z) -> C(X) ^2\n")
    (tmp_path / "b.txt").write_text("x\ty\tz\nx\t\tz\n")  # PSL trims lines, so only an inner field can be empty
    (tmp_path / "m.data").write_text("predicates:\n  B/3: closed\n  C/1: open\nobservations:\n  B: b.txt\n")
    with pytest.raises(ModelFileError, match="argument 2 of B is empty") as info:
        Bridge(tmp_path / "m.psl", tmp_path / "m.data")
    assert info.value.line == 2


def test_data_path_is_a_directory(tmp_path):
    (tmp_path / "m.psl").write_text("1: A(X) -> C(X) ^2\n")
    (tmp_path / "a.txt").mkdir()
    (tmp_path / "m.data").write_text("predicates:\n  A/1: closed\n  C/1: open\nobservations:\n  A: a.txt\n")
    with pytest.raises(ModelFileError, match="data file not found"):
        Bridge(tmp_path / "m.psl", tmp_path / "m.data")


def test_invalid_json_reports_line(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{\n  "rules": ["1: A(X) -> C(X) ^2"],\n  "predicates": {,}\n}\n')
    with pytest.raises(ModelFileError, match="invalid JSON") as info:
        Bridge(path)
    assert info.value.line == 3


def test_invalid_yaml_reports_line(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("rules:\n  - '1: A(X) -> C(X) ^2'\npredicates: [unclosed\n")
    with pytest.raises(ModelFileError, match="invalid YAML") as info:
        Bridge(path)
    assert info.value.line is not None


def test_predicate_without_arity(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"rules": ["1: A(X) -> C(X) ^2"], "predicates": {"A": {}, "C/1": {}}}))
    with pytest.raises(ModelFileError, match="bad or missing arity on predicate A"):
        Bridge(path)


def test_entity_data_map_missing_entities(tmp_path):
    import shutil

    src = MODELS / "mnist-addition" / "neupsl-style"
    shutil.copytree(src, tmp_path / "m")
    path = tmp_path / "m" / "data" / "entity-data-map.txt"
    path.write_text("\n".join(path.read_text().splitlines()[:8]) + "\n")  # images 8 and 9 are gone
    with pytest.raises(ModelFileError, match="entities missing from its entity-data map"):
        Bridge(tmp_path / "m" / "mnist-add1.json", phase="infer")
    (tmp_path / "m" / "data" / "entity-data-map.txt").unlink()
    with pytest.raises(ModelFileError, match="entity-data map of NeuralClassifier not found"):
        Bridge(tmp_path / "m" / "mnist-add1.json", phase="infer")
    _still_usable()


def test_tensor_that_cannot_reach_host_memory(add1):
    class DeviceTensor:
        device = "/device:GPU:7"

        def numpy(self):
            raise RuntimeError("device memory is not accessible")

    with pytest.raises(NeuralInputError, match="GPU:7.*move it to the CPU"):
        add1.infer({"Neural": DeviceTensor()})


def test_unknown_reasoner():
    with pytest.raises(ModelFileError, match="unknown reasoner 'gurobi'"):
        Bridge(SA / "simple-acquaintances.json", reasoner="gurobi")


def test_predictions_given_with_their_entity_ids_are_aligned_and_wrong_ids_are_named(jvm_started):
    """Row order was a silent contract for arrays; (entity_ids, array) pairs are put into the program's order, and
    ids that are missing, unknown or repeated are typed errors naming the entity (nothing is written then)."""
    from pslbridge.errors import NeuralInputError
    from pslbridge.examples.mnist_addition import add1_spec

    with Bridge(add1_spec([(5, 3), (8, 1)])) as bridge:
        ids = bridge.entities("Neural")["arg0"].tolist()
        assert ids == ["5", "3", "8", "1"]
        probs = np.full((4, 10), 0.01, dtype=np.float32)
        probs[[0, 1, 2, 3], [2, 6, 9, 0]] = 0.91
        aligned = bridge.infer({"Neural": probs}).argmax("ImageSum").arg2.astype(int).tolist()
        permuted = [3, 0, 2, 1]
        paired = bridge.infer({"Neural": ([ids[i] for i in permuted], probs[permuted])})
        assert paired.argmax("ImageSum").arg2.astype(int).tolist() == aligned == [8, 9]
        as_ints = bridge.infer({"Neural": ([int(ids[i]) for i in permuted], probs[permuted])})
        assert as_ints.argmax("ImageSum").arg2.astype(int).tolist() == aligned
        for wrong, says in [
            (["5", "3", "8", "7"], r"lacks entity '1'.*'7' is not one of the program's 4 entities"),
            (["5", "3", "8", "8"], "entity '8' is given twice"),
            (["5", "3", "8"], "3 entity ids for 4 rows"),
        ]:
            with pytest.raises(NeuralInputError, match=says):
                bridge.infer({"Neural": (wrong, probs)})
        assert bridge.infer({"Neural": probs}).argmax("ImageSum").arg2.astype(int).tolist() == aligned


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"observations": {"A": [(None,)]}}, r"row 0 of A \(observations\) has a missing value \(None\)"),
        ({"observations": {"A": [(float("nan"),)]}}, r"has a missing value \(nan\)"),
        ({"observations": {"A": {"x": 0.1}}}, "got a mapping"),
        ({"observations": {"A": "xy"}}, "got str .a file is read by a runtime config"),
        ({"targets": {"B": 7}}, "got int"),
        ({"neural": {"A": "three"}}, r"neural predicate 'A': give its class count \(an int\)"),
        ({"predicates": {"A": 1.0, "B": 1}}, "declare an arity"),
        ({"predicates": {"A": "two", "B": 1}}, "declare an arity"),
    ],
)
def test_model_building_from_python_refuses_what_it_used_to_accept(kwargs, says):
    """A None or NaN id became the constant 'None'/'nan'; a dict of rows kept its keys and dropped the values;
    a string made one row per character; bad arities and class counts were raw ValueError/TypeError."""
    from pslbridge import ModelSpec
    from pslbridge.errors import ModelFileError

    model = {"rules": ["1: A(X) -> B(X) ^2"], "predicates": {"A": 1, "B": 1}, **kwargs}
    with pytest.raises(ModelFileError, match=says):
        ModelSpec.from_python(**model)


def test_truth_rows_that_label_no_target_warn_with_their_count():
    """A typo in the ids of truth rows made learn_step run with 0 labelled atoms and no word; truth rows for
    an observed or a neural predicate were ignored silently."""
    from pslbridge import ModelSpec, PslBridgeWarning

    base = {"rules": ["1: A(X) -> B(X) ^2"], "predicates": {"A": 1, "B": 1}, "observations": {"A": [("x",), ("y",)]}}
    with pytest.warns(PslBridgeWarning, match=r"1 of 2 truth rows for B label no target atom, e.g. \('yy',\)"):
        ModelSpec.from_python(**base, targets={"B": [("x",), ("y",)]}, truth={"B": [("x", 1.0), ("yy", 0.0)]})
    with pytest.warns(PslBridgeWarning, match=r"truth rows for A .*\(it has no targets\)"):
        ModelSpec.from_python(**base, targets={"B": [("x",)]}, truth={"A": [("x", 1.0)]})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ModelSpec.from_python(**base, targets={"B": [("x",)]}, truth={"B": [("x", 1.0)]})  # all matched: silent


def test_wrong_kinds_of_model_and_a_matrix_of_a_unary_predicate_are_typed_errors(jvm_started):
    """Bridge(123) and Bridge(dict) were raw TypeErrors; matrix() on a unary predicate a raw IndexError."""
    from pslbridge.errors import ConfigurationError

    for wrong in (123, {"rules": []}):
        with pytest.raises(ConfigurationError, match="Bridge takes a ModelSpec or the path of a model file"):
            Bridge(wrong)
    with Bridge(load_model(SA / "simple-acquaintances.json")) as bridge:
        result = bridge.infer()
    from pslbridge import ModelSpec

    unary = ModelSpec.from_python(
        rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1}, observations={"A": [("x",)]}, targets={"B": [("x",)]}
    )
    with Bridge(unary) as bridge:
        with pytest.raises(ConfigurationError, match=r"matrix\('B'\): a matrix needs an entity and a class"):
            bridge.infer().matrix("B")
    assert result.matrix("Knows")[2].shape[0] > 0  # a binary predicate still makes one
