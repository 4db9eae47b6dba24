"""learn_step(): Φ against the ground terms, neural gradients against finite differences,
weight learning against the jar's own Energy learner."""

from __future__ import annotations

import numpy as np
import pytest

from pslbridge import Bridge, PslBridgeWarning, load_model
from pslbridge.errors import ConfigurationError, ModelFileError
from pslbridge.examples.mnist_addition import add1_spec, add2_spec
from pslbridge.learning import WeightOptimizer
from pslbridge.model import EvaluationSpec, ModelSpec
from pslbridge.oracle import run_runtime

from conftest import EXAMPLES, TIGHT

pytestmark = pytest.mark.usefixtures("jvm_started")

SA = EXAMPLES / "simple-acquaintances" / "simple-acquaintances.json"
FD_OPTIONS = {
    **TIGHT,
    "admmreasoner.epsilonabs": "1e-8",
    "admmreasoner.epsilonrel": "1e-8",
    "admmreasoner.maxiterations": "5000",
}


def _phi_from_ground_terms(bridge: Bridge) -> np.ndarray:
    """Independent Φ: every ground term (exported from PSL's term store) evaluated in numpy, summed per rule."""
    program = bridge.program
    table = program.terms.table()
    incompatibility = table.incompatibility(program.atom_values()).astype(np.float64)
    sums = np.bincount(
        table.rule[~table.constraint], weights=incompatibility[~table.constraint], minlength=len(program.rules)
    )
    return sums[program.weighted_rules]


def _add1(n, labelled, seed=0, peaked=0.6):
    rng = np.random.default_rng(seed)
    digits = rng.integers(0, 10, size=2 * n)
    sums = [int(digits[2 * i] + digits[2 * i + 1]) for i in range(n)]
    spec = add1_spec([(2 * i, 2 * i + 1) for i in range(n)], sums=sums[:labelled] if labelled else None, phase="learn")
    if 0 < labelled < n:
        table = spec.tables("ImageSum", "truth")[0]
        keep = np.isin(table.args[:, 0].astype(int), [2 * i for i in range(labelled)])
        table.args, table.values = table.args[keep], table.values[keep]
    probs = rng.dirichlet(np.ones(10), size=2 * n) * (1 - peaked)
    probs[np.arange(2 * n), rng.integers(0, 10, size=2 * n)] += peaked
    return spec, probs.astype(np.float32)


def test_potentials_match_ground_terms_on_labelled_model():
    with Bridge(load_model(SA, phase="learn"), options=TIGHT) as bridge:
        result = bridge.learn_step()
        assert result.latent_atoms == 0 and result.labelled_atoms == 40
        bridge.program.labels.fix()
        expected = _phi_from_ground_terms(bridge)
        bridge.program.labels.unfix()
    np.testing.assert_allclose(result.rule_potentials, expected, rtol=1e-4, atol=1e-6)
    assert result.loss == pytest.approx(
        float(np.dot(bridge_weights_before := result.rule_weights, result.rule_potentials)), rel=1e-6
    )
    assert bridge_weights_before.shape == (5,)


def test_potentials_match_ground_terms_with_latent_variables():
    rng = np.random.default_rng(3)
    digits = rng.integers(0, 10, size=8)
    quads = [(0, 1, 2, 3), (4, 5, 6, 7)]
    sums = [int(10 * digits[0] + digits[1] + 10 * digits[2] + digits[3]), None]
    probs = rng.dirichlet(np.ones(10), size=8) * 0.2
    probs[np.arange(8), digits] += 0.8
    with Bridge(add2_spec(quads, sums, phase="learn"), options=TIGHT) as bridge:
        result = bridge.learn_step({"Neural": probs.astype(np.float32)})
        assert result.latent_atoms == 4 * 19 + 199 and result.labelled_atoms == 199
        assert result.iterations["latent"] > 0
        bridge.program.labels.fix()
        expected = _phi_from_ground_terms(bridge)
        weights = bridge.rule_weights
        energy, violated = bridge.objective()
        bridge.program.labels.unfix()
    np.testing.assert_allclose(result.rule_potentials, expected, rtol=1e-4, atol=1e-6)
    # Σ_r w_r Φ_r is the objective the reasoner reports at the latent MAP state.
    assert float(np.dot(weights, result.rule_potentials)) == pytest.approx(energy, rel=1e-4, abs=1e-6)
    assert violated == 0


def _latent_energy(bridge, probs):
    return bridge.learn_step({"Neural": probs}).energy


def _check_finite_differences(bridge, probs, rng, eps=1e-3, wanted=20):
    base = bridge.learn_step({"Neural": probs})
    grad = base.neural_gradients["Neural"]
    assert grad.shape == probs.shape
    candidates = [tuple(ix) for ix in np.argwhere((probs > 2 * eps) & (probs < 1 - 2 * eps))]
    rng.shuffle(candidates)
    checked = 0
    for ix in candidates:
        up, down = probs.copy(), probs.copy()
        up[ix] += eps
        down[ix] -= eps
        step_up, step_down = bridge.learn_step({"Neural": up}), bridge.learn_step({"Neural": down})
        g_up, g_down = step_up.neural_gradients["Neural"][ix], step_down.neural_gradients["Neural"][ix]
        if abs(g_up - g_down) > 0.02 * max(abs(g_up), abs(g_down), 1e-3):
            continue  # a hinge kink lies within ±ε: the energy is not differentiable there
        finite = (step_up.energy - step_down.energy) / (2 * eps)
        assert finite == pytest.approx(float(grad[ix]), rel=1e-2, abs=2e-3), ix
        checked += 1
        if checked == wanted:
            break
    assert checked == wanted, f"only {checked} coordinates away from kinks"


def test_neural_gradient_matches_finite_differences_without_latent_variables():
    spec, probs = _add1(n=6, labelled=6, seed=1)
    with Bridge(spec, options=FD_OPTIONS) as bridge:
        _check_finite_differences(bridge, probs, np.random.default_rng(0))


def test_neural_gradient_matches_finite_differences_with_latent_variables():
    rng = np.random.default_rng(5)
    digits = rng.integers(0, 10, size=8)
    probs = rng.dirichlet(np.ones(10), size=8) * 0.5
    probs[np.arange(8), digits] += 0.5
    sums = [int(10 * digits[0] + digits[1] + 10 * digits[2] + digits[3]), None]
    spec = add2_spec([(0, 1, 2, 3), (4, 5, 6, 7)], sums, phase="learn")
    with Bridge(spec, options=FD_OPTIONS) as bridge:
        assert bridge.learn_step({"Neural": probs.astype(np.float32)}).latent_atoms == 4 * 19 + 199
        _check_finite_differences(bridge, probs.astype(np.float32), rng)


def test_gradient_sign_lowers_energy_on_a_wrong_prediction():
    # 4 + 5 = 9, but the network says "2" and "3" with confidence.
    spec = add1_spec([(0, 1)], sums=[9], phase="learn")
    probs = np.full((2, 10), 0.02, dtype=np.float32)
    probs[0, 2] = probs[1, 3] = 0.82
    with Bridge(spec, options=TIGHT) as bridge:
        base = bridge.learn_step({"Neural": probs})
        grad = base.neural_gradients["Neural"]
        assert base.energy > 0
        moved = 0
        for ix in np.argwhere(np.abs(grad) > 1e-3):
            ix = tuple(ix)
            step = probs.copy()
            step[ix] = np.clip(step[ix] - 0.01 * np.sign(grad[ix]), 0, 1)
            assert bridge.learn_step({"Neural": step}).energy < base.energy, ix
            moved += 1
        assert moved >= 4
        # The wrong digits are pushed down, the right ones up.
        assert grad[0, 2] > 0 and grad[1, 3] > 0
        assert grad[0, 4] < 0 and grad[1, 5] < 0
        # A few gradient steps on the prediction itself lower the energy monotonically.
        energies = [base.energy]
        for _ in range(3):
            probs = np.clip(probs - 0.05 * bridge.learn_step({"Neural": probs}).neural_gradients["Neural"], 0, 1)
            energies.append(bridge.learn_step({"Neural": probs}).energy)
        assert all(b < a for a, b in zip(energies, energies[1:]))


@pytest.mark.parametrize("steps", [3])
def test_weight_learning_matches_the_jars_energy_learner_without_neural(steps):
    spec = load_model(SA, phase="learn")
    options = {
        **TIGHT,
        "runtime.learn.method": "Energy",
        "gradientdescent.numsteps": str(steps),
        "gradientdescent.runfulliterations": "true",
    }
    oracle = [w for w in run_runtime(spec, options=options).weights() if w is not None]
    with Bridge(spec, options=TIGHT) as bridge:
        optimizer = WeightOptimizer.from_psl_options(options)
        for _ in range(steps + 2):  # PSL's loop runs numsteps + 2 steps
            bridge.learn_step(weights=optimizer)
        np.testing.assert_allclose(bridge.rule_weights, oracle, atol=1e-4)
        assert bridge.rule_weights.sum() == pytest.approx(1.0, abs=1e-5)


def test_weight_learning_matches_the_jars_energy_learner_with_neural_and_latent_atoms():
    spec, probs = _add1(n=8, labelled=5, seed=2)
    options = {
        **TIGHT,
        "runtime.learn.method": "Energy",
        "gradientdescent.numsteps": "4",
        "gradientdescent.runfulliterations": "true",
        "gradientdescent.stepsize": "0.5",
        "gradientdescent.negativeentropyregularization": "0.5",
    }
    with Bridge(spec, options=TIGHT) as bridge:
        entities, classes = bridge.entities("Neural"), bridge.classes("Neural")
        optimizer = WeightOptimizer.from_psl_options(options)
        first = bridge.learn_step({"Neural": probs}, weights=optimizer)
        assert first.latent_atoms == 3 * 19 and first.iterations["latent"] > 0
        for _ in range(5):
            bridge.learn_step(weights=optimizer)
        ours = bridge.rule_weights
    oracle = run_runtime(
        spec, {"Neural": probs}, entities={"Neural": entities}, classes={"Neural": classes}, options=options
    )
    np.testing.assert_allclose(ours, [w for w in oracle.weights() if w is not None], atol=1e-4)


def test_structured_perceptron_loss_is_non_negative_and_uses_a_map_solve():
    spec, probs = _add1(n=5, labelled=5, seed=4)
    with Bridge(spec, options=TIGHT) as bridge:
        energy = bridge.learn_step({"Neural": probs})
        sp = bridge.learn_step({"Neural": probs}, loss="structured_perceptron")
    assert sp.energy == pytest.approx(energy.energy, rel=1e-5)
    assert sp.loss >= -1e-5 and sp.iterations["map"] > 0
    # ∂loss/∂w is Φ(labels) - Φ(MAP), and the loss is w·(Φ(labels) - Φ(MAP)).
    assert sp.loss == pytest.approx(float(np.dot(sp.rule_weights, sp.rule_potentials)), rel=1e-4, abs=1e-6)


def test_constraint_learning_skips_inference():
    spec, probs = _add1(n=4, labelled=2, seed=6)
    with Bridge(spec, options=TIGHT) as bridge:
        result = bridge.learn_step({"Neural": probs}, constraint_learning=True)
        assert result.iterations["latent"] == 0
        bridge.program.labels.fix()
        expected = _phi_from_ground_terms(bridge)
        bridge.program.labels.unfix()
    np.testing.assert_allclose(result.rule_potentials, expected, rtol=1e-4, atol=1e-6)


def test_labels_are_released_after_a_step():
    spec, probs = _add1(n=3, labelled=3, seed=7)
    with Bridge(spec) as bridge:
        bridge.learn_step({"Neural": probs})
        # After the step, MAP inference may move the labelled atoms again.
        result = bridge.infer()
        assert result.violated_constraints == 0
        index = bridge.program.labels.label_index
        assert all(kind == "RandomVariableAtom" for kind in bridge.program.atoms.kinds(index[:10]))


def test_a_step_without_potentials_gives_the_same_energy_and_gradients():
    spec, probs = _add1(n=6, labelled=3, seed=4)
    with Bridge(spec, options=TIGHT) as full, Bridge(spec, options=TIGHT) as lean:
        with_phi = full.learn_step({"Neural": probs}, reset=True)
        without = lean.learn_step({"Neural": probs}, reset=True, potentials=False)
    assert without.rule_potentials is None and with_phi.rule_potentials is not None
    assert with_phi.latent_atoms > 0  # the energy comes from a latent MAP state, not just the labels
    assert without.energy == pytest.approx(with_phi.energy, rel=1e-5, abs=1e-7)
    assert without.loss == without.energy
    np.testing.assert_allclose(without.neural_gradients["Neural"], with_phi.neural_gradients["Neural"], atol=1e-6)


def test_a_weight_step_or_perceptron_loss_needs_potentials():
    spec, probs = _add1(n=1, labelled=1)
    with Bridge(spec) as bridge:
        with pytest.raises(ConfigurationError, match="potentials=False"):
            bridge.learn_step({"Neural": probs}, weights=WeightOptimizer(), potentials=False)
        with pytest.raises(ConfigurationError, match="potentials=False"):
            bridge.learn_step({"Neural": probs}, loss="structured_perceptron", potentials=False)
        assert bridge.learn_step({"Neural": probs}).rule_potentials.shape == (len(bridge.rule_weights),)


def test_unknown_loss_is_refused():
    spec, probs = _add1(n=1, labelled=1)
    with Bridge(spec) as bridge:
        with pytest.raises(ConfigurationError, match="loss must be one of"):
            bridge.learn_step({"Neural": probs}, loss="hinge")


def test_neural_atoms_in_hard_constraints_are_flagged():
    from pslbridge.model import ModelSpec

    spec = ModelSpec.from_python(
        rules=["1: Neural(I, X) -> Label(I, X) ^2", "Neural(I, +X) = 1 ."],
        predicates={"Neural": ["UniqueStringID", "UniqueStringID"], "Label": 2},
        neural={"Neural": 2},
        targets={"Neural": [("a", "0"), ("a", "1")], "Label": [("a", "0"), ("a", "1")]},
        truth={"Label": [("a", "0", 1.0), ("a", "1", 0.0)]},
    )
    spec.phase = "learn"
    with Bridge(spec) as bridge, pytest.warns(PslBridgeWarning, match="contain neural atoms"):
        result = bridge.learn_step({"Neural": np.array([[0.3, 0.7]])})
        assert result.exact_gradient is False
        # max(0, N - Label)^2: class 0 is satisfied (0.3 <= 1), class 1 pulls with 2 * 0.7.
        np.testing.assert_allclose(result.neural_gradients["Neural"], [[0.0, 1.4]], atol=1e-5)


def test_rules_table_and_explain():
    with Bridge(SA) as bridge:
        bridge.infer()
        table = bridge.rules_table()
        assert len(table) == 6 and table["weighted"].sum() == 5
        assert table["ground_terms"].sum() == bridge.term_count
        weighted = table[table.weighted]
        # Σ w Φ over the rules is the objective at the MAP state.
        assert float((weighted.weight * weighted.potential).sum()) == pytest.approx(bridge.objective()[0], rel=1e-4)
        assert table[~table.weighted]["violated"].sum() == 0
        atom = bridge.atoms("Knows").iloc[0]
        why = bridge.explain("Knows", atom.arg0, atom.arg1)
        assert len(why) > 0 and why.attrs["atom"].startswith("KNOWS(")
        assert set(why.columns) >= {"rule", "term", "incompatibility", "pull"}
        # At an interior MAP value the soft pulls balance (up to the symmetry constraint's multiplier).
        assert np.isfinite(why["pull"]).all()
        with pytest.raises(KeyError, match="not an atom"):
            bridge.explain("Knows", "nobody", "else")


def test_grounding_estimates_before_and_real_counts_after():
    from pslbridge.diagnostics import estimate_groundings

    spec, _ = _add1(n=40, labelled=40)
    estimates = estimate_groundings(spec)
    with Bridge(spec) as bridge:
        real = bridge.rules_table()
        summary = bridge.summary()
    assert summary["atoms_per_predicate"]["IMAGESUM"] == 40 * 19
    assert summary["atoms_per_predicate"]["NEURAL"] == 80 * 10 and summary["java_heap_used_mb"] > 0
    assert summary["terms"] == real["ground_terms"].sum()
    # Every estimate is within a factor of 3 of what grounding produced, on three different models.
    pairs = list(zip(estimates["estimated_groundings"], real["ground_terms"]))
    for other in (load_model(SA), add2_spec([(4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3) for i in range(5)], [1] * 5)):
        with Bridge(other) as bridge:
            pairs += list(zip(estimate_groundings(other)["estimated_groundings"], bridge.rules_table()["ground_terms"]))
    assert len(pairs) == 6 + 6 + 21
    for estimate, actual in pairs:
        assert actual / 3 <= estimate <= actual * 3, (estimate, actual)


def _add2_labelled(seed, n=2, model="neupsl"):
    rng = np.random.default_rng(seed)
    digits = rng.integers(0, 10, size=4 * n)
    probs = rng.dirichlet(np.ones(10), size=4 * n) * 0.5
    probs[np.arange(4 * n), digits] += 0.5
    quads = [tuple(range(4 * i, 4 * i + 4)) for i in range(n)]
    sums = [int(10 * (digits[a] + digits[c]) + digits[b] + digits[d]) for a, b, c, d in quads]
    return add2_spec(quads, sums, phase="learn", model=model), probs.astype(np.float32)


@pytest.mark.parametrize(("model", "seed"), [("neupsl", 11), ("figure", 7)])
def test_observed_labels_give_the_same_latent_energy_from_fewer_terms(model, seed):
    # The oracle is the program PSL's learners build (labels fixed per step), solved to convergence.
    # Both solves run to ADMM's convergence test (the folded one gets there in fewer iterations).
    spec, probs = _add2_labelled(seed=seed, n=1, model=model)
    observed = spec.observe_labels()
    assert observed.observed_labels == ("Sum",) and spec.observed_labels == ()
    options = {**FD_OPTIONS, "admmreasoner.maxiterations": "100000"}
    with Bridge(spec, options=options) as fixed, Bridge(observed, options=options) as folded:
        assert folded.program.term_count < fixed.program.term_count
        want, got = fixed.learn_step({"Neural": probs}), folded.learn_step({"Neural": probs})
    assert (got.labelled_atoms, got.latent_atoms) == (0, 2 * 19)
    assert want.energy > 0.1 and max(want.iterations["latent"], got.iterations["latent"]) < 100000
    assert got.energy == pytest.approx(want.energy, rel=1e-4, abs=1e-5)
    np.testing.assert_allclose(got.rule_potentials, want.rule_potentials, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_observed_labels_gradient_matches_finite_differences():
    spec, probs = _add2_labelled(seed=5, model="figure")
    with Bridge(spec.observe_labels(), options=FD_OPTIONS) as bridge:
        _check_finite_differences(bridge, probs, np.random.default_rng(1), wanted=10)


def test_a_partly_labelled_predicate_keeps_its_labels():
    spec, _ = _add1(n=4, labelled=2, seed=6)
    assert spec.observe_labels() is spec
    spec, _ = _add1(n=4, labelled=4, seed=6)
    assert spec.observe_labels().observed_labels == ("ImageSum",)


def test_losses_that_free_the_labels_refuse_a_program_that_observes_them():
    spec, probs = _add1(n=3, labelled=3, seed=2)
    with Bridge(spec.observe_labels()) as bridge:
        with pytest.raises(ConfigurationError, match="'structured_perceptron' loss needs the labels of ImageSum"):
            bridge.learn_step({"Neural": probs}, loss="structured_perceptron")
        assert bridge.learn_step({"Neural": probs}).energy > 0  # still usable


def test_guide_observed_labels_example_runs(capsys):
    """The guide's observe_labels example runs as written and prints the term counts it states."""
    import re
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "learning.md").read_text()
    code = re.search(r"```python\n(.*?)```", guide.split("## Observed labels", 1)[1], re.S).group(1)
    exec(code, {"np": np, "pslbridge": __import__("pslbridge")})
    counts, energy = capsys.readouterr().out.splitlines()[:2]
    stated = re.search(r"term_count\)  # (\d+) (\d+)", code).groups()
    assert counts.split() == list(stated) and float(energy) > 0


def _add1_relabelled(n, labelled, seed, sums_seed):
    """``_add1``'s program with the sums of another draw: the same truth rows, other label values."""
    spec, probs = _add1(n, labelled, seed=seed)
    other, _ = _add1(n, labelled, seed=sums_seed)
    pairs = [(int(a), int(b)) for a, b in spec.tables("ImageSumBlock", "observations")[0].args[:, :2]]
    sums = [int(np.argmax(r)) for r in other.tables("ImageSum", "truth")[0].values.reshape(-1, 19)]
    relabelled = add1_spec(pairs, sums=sums, phase="learn")
    table = relabelled.tables("ImageSum", "truth")[0]
    keep = np.isin(table.args[:, 0].astype(int), [2 * i for i in range(labelled)])
    table.args, table.values = table.args[keep], table.values[keep]
    return spec, relabelled, probs


@pytest.mark.parametrize("reasoner", ["admm", "dualbcd"])
def test_a_relabelled_program_learns_as_one_grounded_with_those_labels(reasoner):
    """set_labels on a resident program against a program grounded with the new labels (the oracle), with
    latent targets solved for: the same energy and neural gradient, and the truth PSL's evaluators read."""
    spec, relabelled, probs = _add1_relabelled(n=6, labelled=4, seed=4, sums_seed=9)
    new_values = relabelled.tables("ImageSum", "truth")[0].values
    assert not np.array_equal(new_values, spec.tables("ImageSum", "truth")[0].values)
    options = {**FD_OPTIONS} if reasoner == "admm" else {"duallcqp.maxiterations": "20000"}
    with (
        Bridge(spec, options=options, reasoner=reasoner) as resident,
        Bridge(relabelled, options=options, reasoner=reasoner) as fresh,
    ):
        resident.learn_step({"Neural": probs}, reset=True)  # a step on the old labels first
        changed = resident.set_labels({"ImageSum": new_values})
        assert changed == int(np.sum(new_values != spec.tables("ImageSum", "truth")[0].values))
        got = resident.learn_step({"Neural": probs}, reset=True)
        want = fresh.learn_step({"Neural": probs}, reset=True)
        assert got.latent_atoms == want.latent_atoms > 0
        # Each solve stops at its reasoner's tolerance, the resident's from its first step's state.
        tolerance = 1e-4 if reasoner == "admm" else 2e-3
        assert got.energy == pytest.approx(want.energy, rel=tolerance, abs=1e-5)
        np.testing.assert_allclose(got.neural_gradients["Neural"], want.neural_gradients["Neural"], atol=tolerance)
        np.testing.assert_array_equal(resident.program.labels.label_values, fresh.program.labels.label_values)


def test_psls_evaluators_read_the_new_labels():
    def spec(x, y):
        built = ModelSpec.from_python(
            rules=["1: RlA(X) -> RlB(X) ^2", "1: !RlB(X) ^2"],
            predicates={"RlA": 1, "RlB": 1},
            observations={"RlA": [("x", 1.0), ("y", 0.0)]},
            targets={"RlB": [("x",), ("y",)]},
            truth={"RlB": [("x", x), ("y", y)]},
        )
        built.predicates["RLB"].evaluations = [EvaluationSpec("DiscreteEvaluator")]
        return built

    with Bridge(spec(1.0, 0.0)) as resident, Bridge(spec(0.0, 1.0)) as fresh:
        resident.infer()
        assert resident.evaluate().rep_metric.tolist() == [1.0]
        assert resident.set_labels({"RlB": [0.0, 1.0]}) == 2
        fresh.infer()
        assert resident.evaluate().rep_metric.tolist() == fresh.evaluate().rep_metric.tolist() == [0.0]


def test_set_labels_refuses_bad_values_names_the_row_and_changes_nothing():
    spec, probs = _add1(n=2, labelled=2, seed=3)
    with Bridge(spec) as bridge:
        before = bridge.program.labels.label_values.copy()
        energy = bridge.learn_step({"Neural": probs}).energy
        rows = bridge.truth_rows("ImageSum")
        good = np.zeros(len(rows))
        bad = good.copy()
        bad[5] = 1.5
        with pytest.raises(ConfigurationError, match=r"ImageSum truth row 5 \(0, 1, 5\) got 1.5"):
            bridge.set_labels({"ImageSum": bad})
        bad[5] = np.nan
        with pytest.raises(ConfigurationError, match="truth row 5"):
            bridge.set_labels({"ImageSum": bad})
        with pytest.raises(ConfigurationError, match=f"has {len(rows)} truth rows; got values of shape \\(3,\\)"):
            bridge.set_labels({"ImageSum": [0.0, 1.0, 0.0]})
        with pytest.raises(ConfigurationError, match="ImageSumBlock has no truth rows"):
            bridge.set_labels({"ImageSum": good, "ImageSumBlock": [1.0]})  # the good one is not applied either
        with pytest.raises(ModelFileError, match="unknown predicate 'Nope'"):
            bridge.set_labels({"Nope": [1.0]})
        np.testing.assert_array_equal(bridge.program.labels.label_values, before)
        assert bridge.learn_step({"Neural": probs}).energy == pytest.approx(energy)  # still usable, unchanged
        assert bridge.set_labels({"ImageSum": good}) == int(before.sum())  # the ones that were 1
        assert bridge.learn_step({"Neural": probs}).energy != pytest.approx(energy)
