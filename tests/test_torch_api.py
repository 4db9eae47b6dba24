"""pslbridge.torch: PSL's loss as a torch autograd function, against learn_step on fresh copies of the program."""

from __future__ import annotations

import numpy as np
import pytest

from pslbridge import Bridge, ConfigurationError, NeuralInputError
from pslbridge.examples.mnist_addition import add1_spec
from pslbridge.learning import WeightOptimizer
from pslbridge.losses import resolve_loss

torch = pytest.importorskip("torch")
from pslbridge.torch import PSLLoss, psl_loss  # noqa: E402

PROGRAMS = [([(0, 1), (2, 3)], [7, 12]), ([(0, 1), (2, 3)], [3, 9])]


def _predictions(seed: int, rows: int = 4) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(rows, 10))
    return (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32)


def test_psl_loss_and_its_gradient_are_learn_steps(jvm_started):
    p = _predictions(0)
    tensor = torch.tensor(p, requires_grad=True)
    with Bridge(add1_spec(*PROGRAMS[0], phase="learn")) as bridge:
        loss = psl_loss(bridge, {"Neural": tensor})
        (3.0 * loss).backward()  # the upstream gradient scales PSL's
    with Bridge(add1_spec(*PROGRAMS[0], phase="learn")) as fresh:
        step = fresh.learn_step({"Neural": p})
    assert loss.item() == pytest.approx(step.loss, rel=1e-6)
    np.testing.assert_allclose(tensor.grad.numpy(), 3.0 * step.neural_gradients["Neural"], atol=1e-6)


def test_the_bilevel_loss_through_torch_is_learn_steps(jvm_started):
    """Three Minimizer steps (its state lives in the loss object): each step's gradient is learn_step's."""
    preds = [_predictions(seed) for seed in (1, 4, 5)]
    criterion, oracle = PSLLoss(loss=resolve_loss("bce")), resolve_loss("bce")
    got, expected = [], []
    with Bridge(add1_spec(*PROGRAMS[0], phase="learn"), reasoner="dualbcd") as bridge:
        for p in preds:
            tensor = torch.tensor(p, requires_grad=True)
            criterion(bridge, {"Neural": tensor}).backward()
            got.append(tensor.grad.numpy())
    with Bridge(add1_spec(*PROGRAMS[0], phase="learn"), reasoner="dualbcd") as fresh:
        expected = [fresh.learn_step({"Neural": p}, loss=oracle).neural_gradients["Neural"] for p in preds]
    assert max(np.abs(e).max() for e in expected) > 0
    np.testing.assert_allclose(np.stack(got), np.stack(expected), atol=1e-6)


def test_learned_rule_weights_carry_from_program_to_program_as_in_learn_steps(jvm_started):
    preds = [_predictions(2), _predictions(3)]
    criterion = PSLLoss(weights=WeightOptimizer(step_size=0.5))
    bridges = [Bridge(add1_spec(*prog, phase="learn")) for prog in PROGRAMS]
    for bridge, p in zip(bridges * 2, preds * 2):
        criterion(bridge, {"Neural": torch.tensor(p, requires_grad=True)}).backward()
    oracle, weights = WeightOptimizer(step_size=0.5), None
    fresh = [Bridge(add1_spec(*prog, phase="learn")) for prog in PROGRAMS]
    for bridge, p in zip(fresh * 2, preds * 2):
        if weights is not None:
            bridge.rule_weights = weights
        weights = bridge.learn_step({"Neural": p}, weights=oracle).rule_weights
    for bridge in bridges + fresh:
        bridge.close()
    assert not np.allclose(weights, weights.mean())  # the weights moved apart
    np.testing.assert_allclose(criterion.rule_weights, weights, atol=1e-12)
    assert criterion.last is not None and criterion.last.rule_weights is not None


def test_a_plain_torch_loop_lowers_the_loss_over_mini_batches(jvm_started):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 10), torch.nn.Softmax(dim=-1))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
    criterion = PSLLoss()
    bridges = [Bridge(add1_spec(*prog, phase="learn")) for prog in PROGRAMS]
    losses = []
    for _ in range(15):
        total = 0.0
        for bridge in bridges:
            optimizer.zero_grad()
            loss = criterion(bridge, {"Neural": net(torch.eye(4))})
            loss.backward()
            optimizer.step()
            total += loss.item()
        losses.append(total)
    test = Bridge(add1_spec([(0, 1)]))
    result = criterion.infer(test, {"Neural": net(torch.eye(4)[:2])})
    for bridge in [*bridges, test]:
        bridge.close()
    assert losses[-1] < 0.5 * losses[0]
    assert result.iterations > 0


def test_bad_predictions_are_typed_errors_and_the_bridge_stays_usable(jvm_started):
    with Bridge(add1_spec(*PROGRAMS[0], phase="learn")) as bridge:
        with pytest.raises(NeuralInputError, match=r"Neural.*\(4, 10\)"):
            psl_loss(bridge, {"Neural": torch.rand(4, 3)})
        with pytest.raises(NeuralInputError, match=r"\[0, 1\]"):
            psl_loss(bridge, {"Neural": torch.full((4, 10), 2.0)})
        with pytest.raises(ConfigurationError, match="torch tensor"):
            psl_loss(bridge, {"Neural": np.zeros((4, 10))})
        with pytest.raises(ConfigurationError, match="neural predicate: tensor"):
            PSLLoss()(bridge, torch.zeros(4, 10))
        assert psl_loss(bridge, {"Neural": torch.full((4, 10), 0.1)}).item() > 0


def test_one_criterion_learning_weights_refuses_programs_with_other_rules(jvm_started):
    criterion = PSLLoss(weights=WeightOptimizer())
    with (
        Bridge(add1_spec(*PROGRAMS[0], phase="learn")) as a,
        Bridge(add1_spec(*PROGRAMS[0], phase="learn", model="neupsl")) as b,
    ):
        criterion(a, {"Neural": torch.full((4, 10), 0.1)})
        with pytest.raises(ConfigurationError, match="weighted rules"):
            criterion(b, {"Neural": torch.full((4, 10), 0.1)})
