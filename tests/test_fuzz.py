"""Property-based: random rule texts and data tables give a result or a pslbridge error, never a raw
Java exception; the process stays usable. ``make fuzz`` raises the example count."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pslbridge import Bridge, PslBridgeError
from pslbridge.model import ModelSpec

pytestmark = pytest.mark.usefixtures("jvm_started")
EXAMPLES = int(os.environ.get("PSLBRIDGE_FUZZ_EXAMPLES", "150"))

ATOMS = ["A(X)", "A(Y)", "B(X, Y)", "B(Y, X)", "C(X)", "C(Y)", "B(X, 'k')", "A(+X)", "Nope(X)", "A(X, Y)", "B(X)"]
TOKENS = [
    *ATOMS,
    "&",
    "|",
    "->",
    "<-",
    "!",
    "~",
    "+",
    "-",
    "*",
    "2",
    "0.5",
    "=",
    "<=",
    ">=",
    "(",
    ")",
    "{X: C(X)}",
    "^2",
    "^1",
    ".",
    ":",
    "1.0:",
    "3:",
    "/",
    "|X|",
    "@Max[",
    "]",
    ",",
]


def _model(rule: str, rows_b: list[tuple[str, str, float]]) -> ModelSpec:
    return ModelSpec.from_python(
        rules=[rule, "1.0: A(X) & B(X, Y) -> C(Y) ^2"],
        predicates={"A": 1, "B": 2, "C": 1},
        observations={"A": [("x", 1.0), ("y", 0.5), ("k", 0.2)], "B": rows_b},
        targets={"C": [("x",), ("y",), ("k",)]},
    )


def _check(rule: str, rows_b: list[tuple[str, str, float]]) -> None:
    try:
        with Bridge(_model(rule, rows_b), options={"admmreasoner.maxiterations": "50"}) as bridge:
            bridge.infer()
    except PslBridgeError as exc:
        assert str(exc)  # a message, never empty
        assert "Exception:" not in str(exc).splitlines()[0] or "PSL failed" in str(exc)


ROWS = st.lists(
    st.tuples(st.sampled_from(["x", "y", "k"]), st.sampled_from(["x", "y", "k"]), st.floats(0, 1)),
    max_size=4,
    unique_by=lambda r: (r[0], r[1]),
)


@settings(max_examples=EXAMPLES, deadline=10_000, suppress_health_check=list(HealthCheck))
@given(tokens=st.lists(st.sampled_from(TOKENS), min_size=1, max_size=9), rows=ROWS)
def test_random_token_rules_never_leak_java_exceptions(tokens, rows):
    _check(" ".join(tokens), rows)


@settings(max_examples=EXAMPLES, deadline=10_000, suppress_health_check=list(HealthCheck))
@given(
    weight=st.sampled_from(["", "1.0: ", "0: ", "-1: ", "x: "]),
    body=st.lists(st.sampled_from(ATOMS), min_size=1, max_size=3),
    head=st.sampled_from(ATOMS),
    arrow=st.sampled_from(["->", "<-", ">>", "="]),
    tail=st.sampled_from(["", " ^2", " .", " ^3", " ^2 ."]),
    rows=ROWS,
)
def test_rule_shaped_texts_never_leak_java_exceptions(weight, body, head, arrow, tail, rows):
    _check(f"{weight}{' & '.join(body)} {arrow} {head}{tail}", rows)


@settings(max_examples=EXAMPLES // 2, deadline=10_000, suppress_health_check=list(HealthCheck))
@given(
    rows=st.lists(
        st.lists(st.one_of(st.text(max_size=3), st.floats(allow_nan=True), st.integers()), min_size=0, max_size=4),
        max_size=4,
    )
)
def test_random_data_rows_give_a_result_or_a_typed_error(rows):
    try:
        spec = ModelSpec.from_python(
            rules=["1: A(X) -> C(X) ^2"], predicates={"A": 1, "C": 1}, observations={"A": rows}, targets={"C": [("x",)]}
        )
        with Bridge(spec) as bridge:
            bridge.infer()
    except PslBridgeError as exc:
        assert str(exc)
