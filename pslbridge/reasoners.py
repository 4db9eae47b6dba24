"""The MAP reasoners of PSL 2.4.0 that :class:`pslbridge.Bridge` runs, and how they compare.

=======================  ==============================================================================
``reasoner=``            what it is
=======================  ==============================================================================
``"admm"`` (default)     consensus ADMM (``ADMMInference``); the paper's NeuPSL reasoner
``"dualbcd"``            block-coordinate descent on the dual of the regularised LCQP (``DualBCDInference``;
                         Dickens et al., ICML 2024); needed by the bilevel losses
``"distributeddualbcd"`` the same, its blocks updated in parallel (``DistributedDualBCDInference``)
``"sgd"``                stochastic gradient descent (``SGDInference``)
=======================  ==============================================================================

**Dual BCD solves a slightly different problem.** It adds ``λ Σ x²`` over the atoms it solves for
(``duallcqp.regularizationparameter``, λ = 0.01), which makes the optimum unique; the objectives pslbridge reports
(and PSL's own ``DualBCDInference`` returns) are the unregularised ones. Where ADMM's MAP state is unique the two
agree to the solvers' tolerances (``tests/test_bilevel.py`` checks values against the jar's ``DualBCDInference`` to
1e-5 at a fixed 2,000 iterations). Where it is not, they land on different optima of (nearly) the same objective. On
MNIST-Add1 (200 additions, measured on 2 cores): with predictions of 0.9 on the right digit both decode every sum
the same way; at 0.6 ADMM reaches objective 0 at many states and decoded 56–57 % of the sums right, while dual BCD's
minimum-norm optimum decoded 100 % (tightening ``primaldualthreshold`` to 1e-4 changed no decoded sum); at 0.3 or
less both decode badly (ADMM 8–14 %, dual BCD 1–2 %). So: compare objectives and decoded answers, not raw values,
across reasoners; with soft predictions prefer dual BCD for decoding.

**Dual BCD's stopping point is not reproducible run to run.** PSL grounds in parallel, so the order of the ground
terms, which dual BCD sweeps in turn, depends on thread timing, and so does the sweep at which the gap test first
passes: on simple-acquaintances at a 1e-6 gap, runs of the jar itself differed by up to 2e-4 in atom values (5e-5
in weights learned with it). Where that matters, pass ``{"reasoner.runfulliterations": "true"}`` with
``DualBCDOptions(max_iterations=...)`` set past convergence: every order then lands on the same regularised optimum
(3e-8 between runs there at 2,000 iterations). With one PSL thread (``PSLBRIDGE_THREADS=1``) runs repeat
exactly.

Dual BCD reads neural (fixed) atoms from PSL's atom objects rather than the value array; pslbridge synchronises
them before every dual solve (the first solve after a push saw stale predictions before, see the tests).

Warm starts: every solve starts from the previous state unless ``reset=True``; dual BCD keeps its dual variables
across solves, so consecutive learning steps on drifting predictions take few iterations.

Examples:
    >>> DualBCDOptions(primal_dual_threshold=1e-4).to_psl()["duallcqp.primaldualthreshold"]
    '0.0001'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from .errors import ConfigurationError

__all__ = ["DualBCDOptions"]

_NAMES = {
    "primal_dual_threshold": "duallcqp.primaldualthreshold",
    "primal_dual_break": "duallcqp.primaldualbreak",
    "regularization": "duallcqp.regularizationparameter",
    "compute_period": "duallcqp.computeperiod",
    "max_iterations": "duallcqp.maxiterations",
    "first_order_break": "duallcqp.firstorderbreak",
    "first_order_threshold": "duallcqp.firstorderthreshold",
}


@dataclass(frozen=True)
class DualBCDOptions:
    """The dual-BCD reasoners' options with PSL 2.4.0's defaults, as ``duallcqp.*`` PSL options.

    Attributes:
        primal_dual_threshold: Stop when the primal-dual gap is below this (``duallcqp.primaldualthreshold``).
        primal_dual_break: Use that test (``duallcqp.primaldualbreak``).
        regularization: λ of the ``λ Σ x²`` regulariser (``duallcqp.regularizationparameter``), > 0.
        compute_period: Iterations between stopping tests (``duallcqp.computeperiod``); a solve therefore runs
            1, 11, 21, ... iterations.
        max_iterations: Iteration cap (``duallcqp.maxiterations``).
        first_order_break: Also stop when the dual gradient's max-norm is below ``first_order_threshold``.
        first_order_threshold: ``duallcqp.firstorderthreshold``.

    Examples:
        >>> import pslbridge
        >>> opts = DualBCDOptions(primal_dual_threshold=1e-5).to_psl()
        >>> config = "pslbridge/examples/simple-acquaintances/simple-acquaintances.json"
        >>> with pslbridge.Bridge(config, reasoner="dualbcd", options=opts) as bridge:
        ...     bridge.infer().violated_constraints
        0
    """

    primal_dual_threshold: float = 0.01
    primal_dual_break: bool = True
    regularization: float = 0.01
    compute_period: int = 10
    max_iterations: int = 5000
    first_order_break: bool = False
    first_order_threshold: float = 0.001

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) != (f.type in ("bool", bool)):
                raise ConfigurationError(f"DualBCDOptions.{f.name} must be a {f.type}, got {value!r}")
            if not isinstance(value, bool) and not (math.isfinite(value) and value >= 0):
                raise ConfigurationError(f"DualBCDOptions.{f.name} must be a finite number >= 0, got {value!r}")
        if self.regularization <= 0:
            raise ConfigurationError(f"DualBCDOptions.regularization must be > 0, got {self.regularization}")
        if self.compute_period < 1 or self.max_iterations < 1:
            raise ConfigurationError("DualBCDOptions.compute_period and max_iterations must be >= 1")

    def to_psl(self) -> dict[str, str]:
        """PSL option names and values (pass them as ``Bridge(..., options=...)``)."""
        out = {}
        for name, key in _NAMES.items():
            value = getattr(self, name)
            out[key] = ("true" if value else "false") if isinstance(value, bool) else repr(value)
        return out
