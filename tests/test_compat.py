"""PSL compatibility: PSL 2.3's .data dialect, external functional predicates, PSL's evaluators, the CLI's output
format and unknown options, each against the jar (fresh process) or hand-computed values."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from pslbridge import Bridge, ModelFileError, load_model
from pslbridge.model import EvaluationSpec, ModelSpec
from pslbridge.oracle import run_runtime

from conftest import EXAMPLES, REPO, TIGHT

pytestmark = pytest.mark.usefixtures("jvm_started")

SA_RULES = (EXAMPLES / "simple-acquaintances" / "simple-acquaintances.psl").read_text()
SA_DATA = EXAMPLES / "simple-acquaintances" / "data"


def _write(folder, data_text, rules=SA_RULES):
    (folder / "model.psl").write_text(rules)
    (folder / "model.data").write_text(data_text)
    return folder / "model.psl", folder / "model.data"


DIALECT = f"""predicates:
  Knows/2: [open, block]
  Lived/2: [closed, {{types: [UniqueStringID, UniqueStringID]}}]
  Likes: [closed, {{types: [UniqueStringID, UniqueStringID]}}]
observations:
  Knows: {SA_DATA / "knows_obs.txt"}
  Lived: {SA_DATA / "lived_obs.txt"}
  Likes: {SA_DATA / "likes_obs.txt"}
targets:
  Knows: {SA_DATA / "knows_targets.txt"}
truth:
  Knows: {SA_DATA / "knows_truth.txt"}
"""


def test_psl_23_property_lists_types_and_arity_from_types_load_and_match_the_jar(tmp_path, caplog):
    rules, data = _write(tmp_path, DIALECT)
    spec = load_model(rules, data)
    assert spec.predicate("Likes").arity == 2 and spec.predicate("Lived").types == ["UniqueStringID"] * 2
    with Bridge(spec, options=TIGHT) as bridge:
        ours = bridge.infer()["Knows"]
        atoms = bridge.atoms("Knows")
    jar = run_runtime(spec, options=TIGHT).values("Knows", atoms)
    np.testing.assert_allclose(ours, jar, atol=1e-3)
    with Bridge(EXAMPLES / "simple-acquaintances" / "simple-acquaintances.json", options=TIGHT) as reference:
        np.testing.assert_allclose(ours, reference.infer()["Knows"], atol=1e-4)


def test_block_is_accepted_and_logged(tmp_path, caplog):
    rules, data = _write(tmp_path, DIALECT)
    with caplog.at_level("INFO", logger="pslbridge.model"):
        load_model(rules, data)
    assert any("'block' has no PSL 2.4 equivalent and is ignored" in r.getMessage() for r in caplog.records)


def test_a_unary_model_and_integer_ids(tmp_path):
    (tmp_path / "a.txt").write_text("1\t1.0\n2\t0.0\n")
    (tmp_path / "b.txt").write_text("1\n2\n")
    rules, data = _write(
        tmp_path,
        "predicates:\n  A/1: [closed, {types: [UniqueIntID]}]\n  B/1: [open, {types: [UniqueIntID]}]\n"
        "observations:\n  A: a.txt\ntargets:\n  B: b.txt\n",
        rules="1: A(X) -> B(X) ^2\n1: !B(X) ^2\n",
    )
    spec = load_model(rules, data)
    with Bridge(spec, options=TIGHT) as bridge:
        ours = bridge.infer()["B"]
        atoms = bridge.atoms("B")
    np.testing.assert_allclose(ours, [0.5, 0.0], atol=1e-3)
    np.testing.assert_allclose(ours, run_runtime(spec, options=TIGHT).values("B", atoms), atol=1e-3)


@pytest.mark.parametrize(
    ("declaration", "match"),
    [
        ("Knows/2: [open, {modeltype: Foo}]", "model predicates \\('modeltype'\\) have no PSL 2.4 equivalent"),
        ("Knows/2: [open, shiny]", "must be 'open', 'closed', a property list"),
        ("Knows: [open]", "could not find the arity of predicate Knows"),
        ("Knows/3: [open, {types: [UniqueStringID, UniqueStringID]}]", "size mismatch on predicate Knows"),
        ("Knows/2: [{types: [UniqueStringID, UniqueStringID]}]", "say whether it is open or closed"),
    ],
)
def test_bad_declarations_name_the_file_line_and_predicate(tmp_path, declaration, match):
    text = DIALECT.replace("Knows/2: [open, block]", declaration)
    rules, data = _write(tmp_path, text)
    with pytest.raises(ModelFileError, match=match) as info:
        Bridge(rules, data)
    assert info.value.path == str(data) and info.value.line == 2 and info.value.predicate == "Knows"
    # Nothing half-loaded stays registered: the same predicate names load in the next model.
    with Bridge(EXAMPLES / "simple-acquaintances" / "simple-acquaintances.json") as bridge:
        assert bridge.infer().violated_constraints == 0


FUNCTION_RULES = "1: Pair(A, B) & Sim(A, B) -> Link(A, B) ^2\n1: !Link(A, B) ^2\n"


SIM = "Sim: [{implementation: org.example.NameSimilarity, types: [UniqueStringID, UniqueStringID]}]"


def _function_model(tmp_path, declaration=SIM):
    (tmp_path / "links.txt").write_text("ann\tanna\nann\tbob\n")
    text = (
        f"predicates:\n  {declaration}\n  Pair/2: closed\n  Link/2: open\n"
        "observations:\n  Pair: links.txt\ntargets:\n  Link: links.txt\n"
    )
    return _write(tmp_path, text, FUNCTION_RULES)


def test_external_functional_predicates_run_python_callables(tmp_path):
    rules, data = _function_model(tmp_path)
    with pytest.raises(ModelFileError, match="functions=\\{'Sim': fn\\}"):
        Bridge(rules, data)
    calls = []

    def similarity(a: str, b: str) -> float:
        calls.append((a, b))
        return 0.8 if b.startswith(a) else 0.2

    with Bridge(rules, data, functions={"Sim": similarity}, options=TIGHT) as bridge:
        link = bridge.infer().to_frame("Link")
    # (Sim - Link)^2 + Link^2 is smallest at Link = Sim / 2.
    np.testing.assert_allclose(link.value, [0.4, 0.1], atol=1e-3)
    assert sorted(set(calls)) == [("ann", "anna"), ("ann", "bob")]


def test_functional_predicates_through_the_json_route_and_bad_callables(tmp_path):
    config = tmp_path / "model.json"
    config.write_text(
        '{"rules": ["1: Pair(A, B) & Sim(A, B) -> Link(A, B) ^2", "1: !Link(A, B) ^2"], "predicates": {'
        '"Sim/2": {"function": "org.example.Sim"}, "Pair/2": {"observations": [["a", "b"]]}, '
        '"Link/2": {"targets": [["a", "b"]]}}}'
    )
    with pytest.raises(ModelFileError, match="Sim is an external functional predicate"):
        Bridge(config)
    with Bridge(config, functions={"sim": lambda a, b: 1.0}, options=TIGHT) as bridge:
        assert bridge.infer()["Link"][0] == pytest.approx(0.5, abs=1e-3)
    with pytest.raises(ModelFileError, match=r"Sim\('a', 'b'\) returned 2.0, not a number in \[0, 1\]"):
        Bridge(config, functions={"Sim": lambda a, b: 2.0})
    with pytest.raises(ModelFileError, match=r"Sim\('a', 'b'\) raised ZeroDivisionError"):
        Bridge(config, functions={"Sim": lambda a, b: 1 / 0})
    with pytest.raises(ModelFileError, match="not functional predicates"):
        Bridge(config, functions={"Sim": lambda a, b: 1.0, "Link": lambda a, b: 1.0})


EVALUATIONS = [
    EvaluationSpec("DiscreteEvaluator", (), True),
    EvaluationSpec("ContinuousEvaluator"),
    EvaluationSpec("AUCEvaluator"),
    EvaluationSpec("CategoricalEvaluator", (("categoricalevaluator.categoryindexes", "1"),)),
]


def test_psls_evaluators_agree_with_the_jar():
    spec = load_model(EXAMPLES / "simple-acquaintances" / "simple-acquaintances.json")
    spec.predicates["KNOWS"].evaluations = list(EVALUATIONS)
    with Bridge(spec, options=TIGHT) as bridge:
        bridge.infer()
        ours = bridge.evaluate()
    jar = run_runtime(spec, options=TIGHT).evaluations
    assert len(ours) == len(jar) == 4 and ours.primary.tolist() == [True, False, False, False]
    for row, text in zip(ours.itertuples(), jar):
        assert text.startswith(f"Evaluator: {row.evaluator}, Predicate: KNOWS, Results -- ")
        expected = [float(v.split(": ")[1]) for v in text.split("Results -- ")[1].split(", ")]
        got = [float(v.split(": ")[1]) for v in row.stats.split(", ")]
        np.testing.assert_allclose(got, expected, atol=2e-3, err_msg=row.evaluator)


def test_evaluations_in_a_runtime_config_are_read(tmp_path):
    import json
    import shutil

    shutil.copytree(EXAMPLES / "simple-acquaintances", tmp_path / "sa")
    config = tmp_path / "sa" / "simple-acquaintances.json"
    raw = json.loads(config.read_text())
    raw["predicates"]["Knows/2"]["evaluations"] = [
        "DiscreteEvaluator",
        {"evaluator": "ContinuousEvaluator", "options": {"continuousevaluator.representative": "MSE"}, "primary": True},
    ]
    config.write_text(json.dumps(raw))
    assert load_model(config).predicate("Knows").evaluations == [
        EvaluationSpec("DiscreteEvaluator"),
        EvaluationSpec("ContinuousEvaluator", (("continuousevaluator.representative", "MSE"),), True),
    ]
    with Bridge(config) as bridge:
        bridge.infer()
        table = bridge.evaluate()
    assert table.evaluator.tolist() == ["DiscreteEvaluator", "ContinuousEvaluator"]
    assert table.stats[1].startswith("MAE") and table.rep_metric[1] == pytest.approx(
        float(table.stats[1].split("MSE: ")[1].split(",")[0]), abs=1e-6
    )  # the option chose MSE as the representative metric


@pytest.mark.subprocess
def test_cli_output_is_byte_for_byte_the_jars(tmp_path):
    spec = ModelSpec.from_python(
        rules=["1: A(X, Y) -> B(X, Y) ^2", "1: !B(X, Y) ^2"],
        predicates={"A": 2, "B": 2},
        observations={"A": [('"D"', "o'k", 0.75), ("back\\slash", "plain", 0.1)]},
        targets={"B": [('"D"', "o'k"), ("back\\slash", "plain")]},
    )
    jar_dir = tmp_path / "jar"
    run_runtime(
        spec,
        options={
            **TIGHT,
            "runtime.inference.output.results": "true",
            "runtime.inference.output.results.dir": str(jar_dir),
        },
    )
    import json

    from pslbridge.oracle import spec_to_runtime_config

    config = tmp_path / "model.json"
    config.write_text(json.dumps(spec_to_runtime_config(spec, options=TIGHT)))
    ours = tmp_path / "ours"
    proc = subprocess.run(
        [sys.executable, "-m", "pslbridge", "infer", str(config), "--output", str(ours)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    jar_text = (jar_dir / "B.txt").read_text()
    ours_text = (ours / "B.txt").read_text()
    assert '"D"\to\\\'k\t' in jar_text
    jar_rows = [line.split("\t") for line in jar_text.splitlines()]
    our_rows = [line.split("\t") for line in ours_text.splitlines()]
    assert [r[:-1] for r in our_rows] == [r[:-1] for r in jar_rows]  # same atoms, same order, same escapes
    np.testing.assert_allclose([float(r[-1]) for r in our_rows], [float(r[-1]) for r in jar_rows], atol=1e-4)


def test_unknown_option_keys_warn_with_the_closest_known_one():
    spec = ModelSpec.from_python(
        rules=["1: A(X) -> B(X) ^2"],
        predicates={"A": 1, "B": 1},
        observations={"A": [("x", 1.0)]},
        targets={"B": [("x",)]},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Bridge(spec, options={"admmreasoner.maxiteration": 10, "admmreasoner.maxiterations": 10}).close()
    messages = [str(w.message) for w in caught]
    assert messages == [
        "PSL option 'admmreasoner.maxiteration' is unknown to PSL 2.4.0 and is ignored; did you mean "
        "'admmreasoner.maxiterations'?"
    ]
