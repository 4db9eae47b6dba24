import numpy as np
import pytest

from pslbridge.errors import ConfigurationError
from pslbridge.learning import WeightOptimizer, _simplex_project


def test_mirror_descent_stays_on_the_simplex_and_moves_against_the_gradient():
    opt = WeightOptimizer(step_size=0.5, log_regularization=0, entropy_regularization=0)
    w = opt.start(np.array([3.0, 1.0, 1.0]))
    np.testing.assert_allclose(w, [0.6, 0.2, 0.2], rtol=1e-6)
    new = opt.step(w, np.array([2.0, 0.0, 0.0]))
    assert new.sum() == pytest.approx(1.0, abs=1e-6)
    assert new[0] < w[0] and new[1] > w[1]
    expected = w * np.exp(-0.5 * np.array([2.0, 0, 0]))
    np.testing.assert_allclose(new, expected / expected.sum(), rtol=1e-6)


def test_step_size_schedule_divides_by_step_number():
    opt = WeightOptimizer(step_size=1.0)
    assert opt.current_step_size() == 1.0
    opt.step(np.array([0.5, 0.5]), np.zeros(2))
    assert opt.current_step_size() == 0.5
    fixed = WeightOptimizer(step_size=1.0, scale_step_size=False)
    fixed.step(np.array([0.5, 0.5]), np.zeros(2))
    assert fixed.current_step_size() == 1.0


def test_regularisers_match_their_closed_form_gradients():
    opt = WeightOptimizer(
        l2_regularization=0.3, log_regularization=0.2, entropy_regularization=0.1, clip_gradient=False
    )
    w = np.array([0.2, 0.5, 0.3])
    eps = 1e-6
    numeric = [(opt.regularization(w + eps * e) - opt.regularization(w - eps * e)) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(opt.gradient(w, np.zeros(3)), numeric, rtol=1e-4)


def test_gradient_clipping_uses_the_max_norm_by_default():
    opt = WeightOptimizer(log_regularization=0, entropy_regularization=0, max_gradient_magnitude=10)
    np.testing.assert_allclose(opt.gradient(np.array([0.5, 0.5]), np.array([40.0, -20.0])), [10.0, -5.0])
    two = WeightOptimizer(
        log_regularization=0, entropy_regularization=0, max_gradient_norm=2.0, max_gradient_magnitude=5
    )
    np.testing.assert_allclose(two.gradient(np.array([0.5, 0.5]), np.array([3.0, 4.0])), [3.0, 4.0])
    np.testing.assert_allclose(two.gradient(np.array([0.5, 0.5]), np.array([6.0, 8.0])), [3.0, 4.0])


def test_projected_gradient_and_plain_descent():
    proj = WeightOptimizer(
        extension="projected_gradient", step_size=1.0, log_regularization=0, entropy_regularization=0
    )
    new = proj.step(np.array([0.5, 0.5]), np.array([1.0, -1.0]))
    np.testing.assert_allclose(new, [0.0, 1.0])
    plain = WeightOptimizer(extension="none", step_size=1.0, log_regularization=0, entropy_regularization=0)
    np.testing.assert_allclose(plain.start(np.array([2.0, 3.0])), [2.0, 3.0])
    np.testing.assert_allclose(plain.step(np.array([2.0, 3.0]), np.array([3.0, 1.0])), [0.0, 2.0])


def test_simplex_projection_is_a_projection():
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.normal(size=5)
        p = _simplex_project(v)
        assert p.min() >= 0 and p.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(_simplex_project(p), p, atol=1e-12)


def test_psl_option_names_and_bad_values():
    opt = WeightOptimizer.from_psl_options(
        {
            "gradientdescent.extension": "PROJECTED_GRADIENT",
            "gradientdescent.stepsize": "0.01",
            "gradientdescent.scalestepsize": "false",
            "gradientdescent.maxgradientnorm": "Infinity",
            "admmreasoner.maxiterations": "10",
        }
    )
    assert (opt.extension, opt.step_size, opt.scale_step_size) == ("projected_gradient", 0.01, False)
    with pytest.raises(ConfigurationError):
        WeightOptimizer(extension="adam")
    with pytest.raises(ConfigurationError):
        WeightOptimizer(step_size=0)
    with pytest.raises(ConfigurationError):
        WeightOptimizer(log_regularization=-1)
