"""Mini-batches by connected component: the batched programs are the whole program, piece by piece.

Oracle: the whole program's learn_step. Its energy is the sum of the batches' energies and each entity's
gradient is the same, since the components share no ground rule.
"""

from __future__ import annotations

import numpy as np
import pytest

from pslbridge import Bridge, ConfigurationError, ModelSpec
from pslbridge.batching import component_batches, component_specs, components
from pslbridge.examples.mnist_addition import add1_spec, add2_spec
from pslbridge.neural_inputs import entity_keys

from conftest import TIGHT_LONG


def _predictions(rows: int, seed: int = 0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(rows, 10))
    return (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize(("build", "width"), [(add1_spec, 2), (add2_spec, 4)])
def test_batched_energies_and_gradients_are_the_whole_programs(build, width, jvm_started):
    groups = [tuple(range(width * k, width * k + width)) for k in range(6)]
    sums = [int(s) for s in np.random.default_rng(1).integers(0, 19 if width == 2 else 199, size=6)]
    spec = build(groups, sums=sums, phase="learn")
    rows = width * 6
    p = _predictions(rows)
    with Bridge(spec, options=TIGHT_LONG) as whole:
        step = whole.learn_step({"Neural": (list(range(rows)), p)})
        expected = dict(zip(entity_keys(whole.entities("Neural")), step.neural_gradients["Neural"]))
        energy = step.energy
    batches = component_batches(spec, {"Neural": (range(rows), p)}, per_batch=2, seed=3, options=TIGHT_LONG)
    assert len(batches) == 3
    total, found = 0.0, {}
    for bridge, inputs in batches:
        part = bridge.learn_step(inputs)
        total += part.energy
        found.update(dict(zip(entity_keys(bridge.entities("Neural")), part.neural_gradients["Neural"])))
        bridge.close()
    assert sorted(found) == sorted(expected)  # every entity in exactly one batch
    assert max(np.abs(v).max() for v in expected.values()) > 0.1
    assert total == pytest.approx(energy, rel=1e-6)
    for key, gradient in expected.items():
        np.testing.assert_allclose(found[key], gradient, atol=1e-4)  # ADMM solves each to 1e-7, not exactly


def test_each_row_with_an_entity_is_in_one_batch_and_the_value_tables_in_every_one():
    spec = add1_spec([(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)], sums=[1, 2, 3, 4, 5], phase="learn")
    ids = components(spec)
    assert sorted({int(c) for comp in ids for c in comp}) == [-1, 0, 1, 2, 3, 4]  # five additions; shared rows
    specs = component_specs(spec, per_batch=2)
    assert [len(s.tables("ImageSumBlock", "observations")[0]) for s in specs] == [2, 2, 1]
    for table_index, table in enumerate(spec.data):
        counts = [len(s.data[table_index]) for s in specs]
        shared = int((ids[table_index] < 0).sum())
        assert sum(counts) - shared * (len(specs) - 1) == len(table)  # no row lost, none doubled but the shared
    images = [s.tables("Neural", "targets")[0].args[:, 0].tolist() for s in specs]
    assert [sorted(set(i)) for i in images] == [["0", "1", "2", "3"], ["4", "5", "6", "7"], ["8", "9"]]


@pytest.mark.parametrize("seed", [None, 5])
def test_a_batch_holds_whole_components_and_the_shared_rows_in_the_tables_order(seed):
    spec = add2_spec([tuple(range(4 * k, 4 * k + 4)) for k in range(7)], sums=list(range(7)), phase="learn")
    ids = components(spec)
    index = [{tuple(row): r for r, row in enumerate(table.args.tolist())} for table in spec.data]
    held = []  # the components of each batch
    for part in component_specs(spec, per_batch=3, seed=seed):
        rows = [np.array([at[tuple(r)] for r in t.args.tolist()], dtype=np.int64) for at, t in zip(index, part.data)]
        mine = sorted({int(c) for comp, r in zip(ids, rows) for c in comp[r] if c >= 0})
        held.append(mine)
        for comp, r in zip(ids, rows):
            np.testing.assert_array_equal(r, np.flatnonzero((comp < 0) | np.isin(comp, mine)))  # in order, whole
    assert sorted(c for mine in held for c in mine) == list(range(7))  # each component in one batch
    assert [len(mine) for mine in held] == [3, 3, 1]
    if seed is None:
        assert held == [[0, 1, 2], [3, 4, 5], [6]]


def test_a_target_without_an_entity_argument_couples_everything_and_is_refused():
    spec = ModelSpec.from_python(
        rules=["1: Neural(I, D) -> Global(D) ^2"],
        predicates={"Neural": 2, "Global": 1},
        neural={"Neural": 2},
        targets={"Neural": [(0, 0), (0, 1), (1, 0), (1, 1)], "Global": [(0,), (1,)]},
    )
    with pytest.raises(ConfigurationError, match="Global has targets rows without an entity argument"):
        component_specs(spec, per_batch=1)


def test_a_model_without_neural_predicates_splits_by_the_named_entity_arguments():
    spec = ModelSpec.from_python(
        rules=["1: Link(A, B) & Cat(A) -> Cat(B) ^2"],
        predicates={"Link": 2, "Cat": 1},
        observations={"Link": [("a", "b"), ("b", "c"), ("x", "y")]},
        targets={"Cat": [("a",), ("b",), ("c",), ("x",), ("y",)]},
    )
    with pytest.raises(ConfigurationError, match="entities="):
        components(spec)
    specs = component_specs(spec, per_batch=1, entities={"Cat": [0]})
    assert [sorted(s.tables("Cat", "targets")[0].args[:, 0].tolist()) for s in specs] == [["a", "b", "c"], ["x", "y"]]
    with pytest.raises(ConfigurationError, match="per_batch must be an integer >= 1"):
        component_specs(spec, per_batch=0, entities={"Cat": [0]})
