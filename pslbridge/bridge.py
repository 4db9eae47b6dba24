"""The public :class:`Bridge`: a resident PSL program that takes neural predictions and returns MAP states.

Push a network's predictions in, get MAP values (and, for learning, losses and gradients) out.

Examples:
    >>> import pslbridge
    >>> bridge = pslbridge.Bridge.from_python(
    ...     rules=["5: Lived(A, L) & Lived(B, L) & (A != B) -> Knows(A, B) ^2", "1: !Knows(A, B) ^2"],
    ...     predicates={"Lived": 2, "Knows": 2},
    ...     observations={"Lived": [("alice", "paris"), ("bob", "paris")]},
    ...     targets={"Knows": [("alice", "bob"), ("bob", "alice")]},
    ... )
    >>> bridge.infer().to_frame("Knows").round(3)
        arg0   arg1  value
    0  alice    bob  0.833
    1    bob  alice  0.833
    >>> bridge.close()
"""

from __future__ import annotations

import logging
import re
import time
import warnings
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .diagnostics import estimate_groundings
from .errors import ConfigurationError, EngineError, NeuralInputError, PslBridgeWarning
from .learning import WeightOptimizer
from .losses import Loss, StepContext, resolve_loss, warn_without_truth
from .model import ModelSpec, load_model
from .program import GroundProgram
from .program.labels import set_labels
from .results import InferenceResult, LearnResult
from .rule_text import predicates_in
from .view import ProgramView

__all__ = ["Bridge", "InferenceResult", "LearnResult", "close_all"]

log = logging.getLogger(__name__)

#: The bridges of this process that are still open (a bridge leaves it when closed or garbage-collected).
_OPEN: weakref.WeakSet[Bridge] = weakref.WeakSet()


def _release(program: GroundProgram) -> None:
    """Close a program whose bridge was garbage-collected without ``close()`` (its Java objects and predicates)."""
    try:
        program.close()
    except Exception:  # noqa: BLE001 - a finalizer must not raise; the JVM may be going down
        log.debug("closing a garbage-collected program failed", exc_info=True)


def close_all() -> int:
    """Close every open bridge of this process (their Java objects and predicates); the JVM stays up.

    Returns:
        How many bridges were closed.

    Examples:
        >>> import pslbridge
        >>> config = "pslbridge/examples/simple-acquaintances/simple-acquaintances.json"
        >>> a, b = pslbridge.Bridge(config), pslbridge.Bridge(config)
        >>> close_all() >= 2, repr(a)
        (True, '<Bridge closed>')
    """
    bridges = list(_OPEN)
    for bridge in bridges:
        bridge.close()
    return len(bridges)


#: Estimated ground rules of one rule above which building a bridge warns (at a few hundred bytes of Java heap
#: per ground rule, tens of GB).
GROUNDING_WARNING = 5e7


def _check_grounding_size(spec: ModelSpec, limit: float | None) -> None:
    """Warn about (or, above ``limit``, refuse) rules estimated to ground into very many ground rules."""
    if limit is not None and not (isinstance(limit, (int, float)) and limit > 0):
        raise ConfigurationError(f"max_groundings must be a positive number or None, got {limit!r}")
    estimates = estimate_groundings(spec)
    for rule, estimate in zip(estimates["rule"], estimates["estimated_groundings"]):
        if limit is not None and estimate > limit:
            raise ConfigurationError(
                f"rule {rule!r} is estimated to ground into {estimate:.3g} ground rules, above max_groundings="
                f"{limit:.3g}; block it (e.g. a blocking predicate) or raise the limit"
            )
        if estimate > GROUNDING_WARNING:
            warnings.warn(
                f"rule {rule!r} is estimated to ground into {estimate:.3g} ground rules (pslbridge.diagnostics."
                "estimate_groundings); grounding may take very long and exhaust the Java heap. Refuse such rules "
                "with Bridge(..., max_groundings=...)",
                PslBridgeWarning,
                stacklevel=3,
            )


_WEIGHT = re.compile(r"^\s*([0-9.eE+-]+)\s*:")


def _warn_all_zero_weights(spec: ModelSpec, grounded: np.ndarray) -> None:
    """PSL (the jar too) grounds weighted rules that all have weight 0 with weight 1: say so."""
    written = [_WEIGHT.match(rule.text) for rule in spec.rules]
    weights = [float(m.group(1)) for m in written if m is not None]
    if weights and all(w == 0 for w in weights) and len(grounded) and bool(np.all(grounded == 1.0)):
        warnings.warn(
            "every weighted rule has weight 0 in the model; PSL grounds them with weight 1 (as the jar does). "
            "Set bridge.rule_weights to choose other weights",
            PslBridgeWarning,
            stacklevel=4,
        )


class Bridge(ProgramView):
    """A PSL model grounded once and kept resident; push neural predictions, get MAP states.

    A bridge may be shared between threads: pushes, solves, reads and learning steps of one bridge run one
    at a time (a lock per program), so each call sees its own predictions. Bridges of different programs
    run in parallel (PSL's solver itself is multi-threaded).

    Args:
        model: A :class:`~pslbridge.model.ModelSpec`, or a path to a runtime config
            (``.json``/``.yaml``) or ``.psl`` file.
        data: With a ``.psl`` path: its ``.data`` file; with a config: a data folder.
        phase: ``"infer"`` (default) or ``"learn"`` data of a config that has both.
        options: PSL options for this program (``{"admmreasoner.maxiterations": 500}``); ``minimizer.*``
            options configure the bilevel losses.
        reasoner: ``"admm"`` (default), ``"dualbcd"``, ``"distributeddualbcd"`` or ``"sgd"``; see
            :mod:`pslbridge.reasoners` for how the dual-BCD ones compare with ADMM.
        functions: Python callables for the model's external functional predicates, by name: PSL calls
            ``fn(*arguments)`` (strings, as in the data) while grounding; each returns a number in [0, 1].
        max_groundings: Refuse to ground a rule whose estimated ground rules
            (:func:`pslbridge.diagnostics.estimate_groundings`) exceed this (None: no limit). Above
            :data:`GROUNDING_WARNING` a warning names the rule and its estimate either way.

    Raises:
        ModelFileError: The model is malformed.
        ConfigurationError: A rule's estimated groundings exceed ``max_groundings``.
        EngineError: PSL failed while grounding.

    Warns:
        PslBridgeWarning: A rule is estimated to ground into more than :data:`GROUNDING_WARNING` ground rules.

    Examples:
        >>> with Bridge("pslbridge/examples/simple-acquaintances/simple-acquaintances.json") as bridge:
        ...     bridge.infer().violated_constraints
        0
    """

    def __init__(
        self,
        model: ModelSpec | str | Path,
        data: str | Path | None = None,
        *,
        phase: str = "infer",
        options: Mapping[str, Any] | None = None,
        reasoner: str = "admm",
        functions: Mapping[str, Any] | None = None,
        max_groundings: float | None = None,
    ) -> None:
        if not isinstance(model, (ModelSpec, str, Path)):
            raise ConfigurationError(
                f"Bridge takes a ModelSpec or the path of a model file (.json, .yaml, .psl), got "
                f"{type(model).__name__}; build a model from Python objects with Bridge.from_python(...)"
            )
        spec = model if isinstance(model, ModelSpec) else load_model(model, data, phase=phase)
        _check_grounding_size(spec, max_groundings)
        self._program: GroundProgram | None = GroundProgram(spec, dict(options or {}), reasoner, functions)
        self._pushed: set[str] = set()
        self._losses: dict[str, Loss] = {}
        neural_names = set(self._program.neural)
        self._neural_in_constraints = [
            rule.text
            for rule, info in zip(spec.rules, self._program.rules)
            if not info.weighted and neural_names & predicates_in(rule.text)
        ]
        self._warned_constraints = False
        self._solved = False  # evaluate() before any solve scores the initial values (warned)
        _warn_all_zero_weights(spec, self._program.rule_weights)
        # Dropped without close(): the program is closed when the bridge is garbage-collected (not at exit, when
        # the JVM may already be gone).
        self._finalizer = weakref.finalize(self, _release, self._program)
        self._finalizer.atexit = False
        _OPEN.add(self)

    @classmethod
    def from_python(
        cls,
        *,
        options: Mapping[str, Any] | None = None,
        reasoner: str = "admm",
        functions: Mapping[str, Any] | None = None,
        **model: Any,
    ) -> Bridge:
        """Build from Python objects; keyword arguments as :meth:`ModelSpec.from_python`.

        Examples:
            >>> b = Bridge.from_python(rules=["1: FpA(X) -> FpB(X) ^2"], predicates={"FpA": 1, "FpB": 1},
            ...                        observations={"FpA": [("x",)]}, targets={"FpB": [("x",)]})
            >>> b.term_count
            1
            >>> b.close()
        """
        return cls(ModelSpec.from_python(**model), options=options, reasoner=reasoner, functions=functions)

    # -- introspection ----------------------------------------------------------------

    # -- pushing and solving ----------------------------------------------------------

    def push(self, neural: Mapping[str, Any] | Any) -> None:
        """Validate and write neural predictions into the resident atoms.

        Args:
            neural: ``{predicate: array (n_entities, n_classes)}``; with exactly one neural predicate a bare
                array is taken as that predicate's.

        Raises:
            NeuralInputError: Unknown predicate or a bad array (nothing is written then).

        Examples:
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)])) as b:
            ...     b.push(np.full((2, 10), 0.1))
            ...     b.push({"Neural": np.ones((2, 9))})
            Traceback (most recent call last):
            ...
            pslbridge.errors.NeuralInputError: neural predicate 'Neural': expected shape (2, 10) ... got (2, 9)
        """
        program = self.program
        mapping = _as_mapping(neural, self.neural_predicates)
        with program.lock:
            program.write_neural(mapping)
            self._pushed.update(program.atoms.block(str(name)).spec.key for name in mapping)

    def set_labels(self, labels: Mapping[str, Any]) -> int:
        """Give the labels new values in place, all or (on an error) none; returns how many changed.

        ``{target predicate: values}``: one value in [0, 1] per row of :meth:`truth_rows`. One resident program can
        so serve many batches of one shape; learning steps and :meth:`evaluate` read the new labels.

        Raises:
            ConfigurationError: No truth rows, values of another length, non-finite or outside [0, 1] (row named).

        Examples:
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:  # the sum 3 becomes 5
            ...     b.set_labels({"ImageSum": [float(row[-1] == "5") for row in b.truth_rows("ImageSum")]})
            2
        """
        return set_labels(self.program, labels)

    def infer(self, neural: Mapping[str, Any] | Any = None, *, reset: bool = False) -> InferenceResult:
        """Push neural predictions (optional) and run MAP inference on the resident program.

        Args:
            neural: ``{predicate: array (n_entities, n_classes)}`` (or one bare array, see :meth:`push`);
                omitted predicates keep their last values.
            reset: Restart the reasoner from the current atom values instead of warm-starting
                from the previous solution (do this when predictions changed a lot).

        Returns:
            The MAP values, objective, violated constraints, iterations and timings.

        Raises:
            NeuralInputError: A bad array, or a neural predicate that never got values.
            EngineError: The engine failed.
            ClosedError: After :meth:`close`.

        Examples:
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)])) as b:
            ...     probs = np.full((2, 10), 0.01); probs[0, 3] = probs[1, 4] = 0.91
            ...     b.infer({"Neural": probs}).argmax("ImageSum").arg2.tolist()
            ['7']
        """
        program = self.program
        with program.lock:
            t0 = time.perf_counter()
            if neural is not None:
                self.push(neural)
            self._check_pushed()
            t1 = time.perf_counter()
            stats = program.solve(reset=reset)
            self._solved = True
            t2 = time.perf_counter()
            values = program.read_targets()
            t3 = time.perf_counter()
        frames = {self.spec.predicates[k].name: rows.frame for k, rows in program.targets.items()}
        timings = {"push": t1 - t0, "solve": t2 - t1, "read": t3 - t2}
        return InferenceResult(values, stats.objective, stats.violated_constraints, stats.iterations, timings, frames)

    def learn_step(
        self,
        neural: Mapping[str, Any] | Any = None,
        *,
        loss: str | Loss = "energy",
        weights: WeightOptimizer | None = None,
        constraint_learning: bool = False,
        reset: bool = False,
        potentials: bool = True,
    ) -> LearnResult:
        """One learning step: the loss, ``∂loss/∂w`` (Φ-based) and ``∂loss/∂prediction`` at the pushed predictions.

        Args:
            neural: Predictions per neural predicate (as in :meth:`infer`).
            loss: ``"energy"`` (NeuPSL's, the default), ``"structured_perceptron"``, ``"bce"`` or
                ``"squared_error"`` (bilevel, dual-BCD reasoners only; configured by the bridge's ``minimizer.*``
                options), or a :class:`pslbridge.losses.Loss`. See :mod:`pslbridge.losses` for what each computes.
            weights: A :class:`~pslbridge.learning.WeightOptimizer` to take a weight step with ``∂loss/∂w``; None
                leaves the weights alone. On its first step the weights are first scaled onto the simplex, as PSL does.
            constraint_learning: Energy losses: skip latent inference and evaluate at the current atom values.
            reset: Restart solves from the current atom values instead of warm-starting.
            potentials: Compute Φ. ``potentials=False`` (energy loss without a weight step only) gets the energy from
                one objective pass instead and leaves ``rule_potentials`` None.

        Returns:
            Loss, ``∂loss/∂w``, neural gradients, new weights, iterations and timings.

        Raises:
            NeuralInputError: A bad array or a neural predicate without predictions.
            ConfigurationError: Unknown loss, ``potentials=False`` where Φ is needed, a bilevel loss on a program
                without labels or on the ADMM reasoner, a loss other than the energy on a program whose labels are
                observed (:meth:`~pslbridge.model.ModelSpec.observe_labels`).

        Warns:
            UserWarning: The energy loss on a program without labels (it learns nothing from data).

        Examples:
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)], sums=[7], phase="learn")) as b:
            ...     step = b.learn_step({"Neural": np.full((2, 10), 0.1)})
            ...     step.neural_gradients["Neural"].shape, step.energy > 0
            ((2, 10), True)
        """
        program = self.program
        chosen = self._loss(loss)
        if program.spec.observed_labels and not chosen.accepts_observed_labels:
            raise ConfigurationError(
                f"the {chosen.name!r} loss needs the labels of {', '.join(program.spec.observed_labels)} as labels, "
                "but this program observes them (ModelSpec.observe_labels); use the energy loss, or build the "
                "program from the spec before observe_labels()"
            )
        if not potentials and (weights is not None or chosen.needs_potentials):
            raise ConfigurationError(
                f"potentials=False only works for the energy loss without a weight step: {chosen.name!r}"
                + (" with a weight step" if weights is not None else "")
                + " needs Φ"
            )
        with program.lock:
            t = time.perf_counter()
            if neural is not None:
                self.push(neural)
            self._check_pushed()
            if weights is not None and weights.steps_taken == 0:
                program.rule_weights = weights.start(program.rule_weights)
            push_time = time.perf_counter() - t
            ctx = StepContext(program, reset=reset, potentials=potentials, constraint_learning=constraint_learning)
            out = chosen.step(ctx)
            self._solved = True
            _check_finite(program, out)
            warn_without_truth(program, out)
            before = program.rule_weights
            t = time.perf_counter()
            if weights is not None:
                assert out.weight_gradient is not None
                program.rule_weights = weights.step(before, out.weight_gradient)
            after = program.rule_weights
            chosen.finish(program, float(np.abs(after - before).sum()))
            step_time = time.perf_counter() - t
        return self._learn_result(out, after, {"push": push_time, **out.timings, "step": step_time})

    def _loss(self, loss: str | Loss) -> Loss:
        if isinstance(loss, Loss):
            return loss
        key = str(loss).lower()
        if key not in self._losses:
            self._losses[key] = resolve_loss(loss, self.program.options)
        return self._losses[key]

    def _learn_result(self, out: Any, weights: np.ndarray, timings: dict[str, float]) -> LearnResult:
        # ADMM's optimal-value gradient skips constraint terms; the dual-BCD reasoners' comes from every term's
        # dual variable, hard constraints included.
        exact = not self._neural_in_constraints or self.program.solver.dual
        if not exact and not self._warned_constraints:
            warnings.warn(
                f"hard constraint(s) {self._neural_in_constraints} contain neural atoms; PSL's gradient skips "
                "constraint terms, so neural gradients ignore them (write them as heavily weighted soft rules for "
                "exact gradients, or use reasoner='dualbcd')",
                PslBridgeWarning,
                stacklevel=3,
            )
            self._warned_constraints = True
        return LearnResult.from_step(self.program, out, weights, timings, exact)

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Free the program's Java objects; the JVM stays up. Safe to call twice.

        Examples:
            >>> b = Bridge("pslbridge/examples/simple-acquaintances/simple-acquaintances.json"); b.close(); b.close()
        """
        if self._program is not None:
            program, self._program = self._program, None
            self._finalizer.detach()
            _OPEN.discard(self)
            program.close()

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_mapping(neural: Any, names: list[str]) -> Mapping[str, Any]:
    """``{predicate: array}`` from what the user passed (a bare array for a model with one neural predicate)."""
    if isinstance(neural, Mapping):
        return neural
    if isinstance(neural, (str, bytes)) or not (hasattr(neural, "__len__") or hasattr(neural, "__array__")):
        raise NeuralInputError(f"neural must be a mapping of predicate name to array, got {type(neural).__name__}")
    if len(names) != 1:
        raise NeuralInputError(
            f"neural must be a mapping {{predicate: array}}: this model has {len(names)} neural predicates "
            f"({names}), so a bare {type(neural).__name__} is ambiguous"
        )
    return {names[0]: neural}


def _check_finite(program: GroundProgram, out: Any) -> None:
    """A learning step never hands back NaN or infinity: it raises, naming the rules and their weights."""
    parts = [np.asarray(out.loss), np.asarray(out.atom_gradient)]
    if out.weight_gradient is not None:
        parts.append(np.asarray(out.weight_gradient))
    if all(np.isfinite(p).all() for p in parts):
        return
    weights = dict(zip(program.weighted_texts(), program.rule_weights.tolist()))
    raise EngineError(
        f"the learning step produced a non-finite loss or gradient (loss {out.loss}); rule weights: {weights}"
    )
