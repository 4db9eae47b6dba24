"""What a PSL rule's text refers to, read without a JVM: its atoms, their arguments and where they stand.

One small scanner serves every place that needs it before PSL's own parser runs: checking a model's rules
against its predicates (unknown names, wrong arity, negative weights), finding which rules touch which
predicates, and estimating groundings. Quoted constants are skipped, ``@Max[...]``-style functions are not
atoms, and atoms inside a ``{...}`` selection are reported with ``in_selection=True``.

Examples:
    >>> [(a.predicate, a.args, a.negated, a.side) for a in rule_atoms("3: Knows(A, B) & !Lived(A, 'x') -> Likes(A, B)")]
    [('Knows', ('A', 'B'), False, 'body'), ('Lived', ('A', "'x'"), True, 'body'), ('Likes', ('A', 'B'), False, 'head')]
    >>> rule_weight("0.5: A(X) -> B(X) ^2"), rule_weight("A(X) -> B(X) .")
    (0.5, None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["AtomRef", "predicates_in", "rule_atoms", "rule_weight"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WEIGHT = re.compile(r"^\s*([-+]?\s*(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*:")
_ARROWS = (("->", False), (">>", False), ("<-", True), ("<<", True))


@dataclass(frozen=True)
class AtomRef:
    """One atom as written in a rule.

    Attributes:
        predicate: The predicate name as written.
        args: Argument texts, stripped (``+X`` and quoted constants kept as written).
        negated: Preceded by ``!`` or ``~``.
        side: ``"body"`` or ``"head"`` of a logical rule, ``"arithmetic"`` otherwise.
        in_selection: Inside a ``{...}`` selection clause of an arithmetic rule.

    Examples:
        >>> AtomRef("A", ("X",), False, "body", False).arity
        1
    """

    predicate: str
    args: tuple[str, ...]
    negated: bool
    side: str
    in_selection: bool

    @property
    def arity(self) -> int:
        """Number of arguments."""
        return len(self.args)


def _mask_quotes(text: str) -> str:
    """The text with every character inside quotes replaced (positions kept)."""
    out, quote = [], None
    for ch in text:
        if quote is None:
            if ch in "'\"":
                quote = ch
            out.append(ch)
        elif ch == quote:
            quote = None
            out.append(ch)
        else:
            out.append("_")
    return "".join(out)


def _arguments(masked: str, text: str, start: int) -> tuple[tuple[str, ...], int]:
    """Split the argument list that opens at ``start`` (after the '('); return the args and the end."""
    depth, i, pieces, begin = 0, start, [], start
    while i < len(masked):
        ch = masked[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append(text[begin:i].strip())
            begin = i + 1
        i += 1
    last = text[begin:i].strip()
    if last or pieces:
        pieces.append(last)
    return tuple(pieces), i


def _side_of(masked: str, position: int) -> str:
    for arrow, head_first in _ARROWS:
        at = masked.find(arrow)
        if at >= 0:
            before = position < at
            return "head" if before == head_first else "body"
    return "arithmetic"


def rule_atoms(text: str) -> list[AtomRef]:
    """The atoms of a rule, in the order written.

    Examples:
        >>> [a.predicate for a in rule_atoms("1: Neural(I, +X) >= Sum(I, Z) ^2 {X: Possible(X, Z)}")]
        ['Neural', 'Sum', 'Possible']
        >>> rule_atoms("1: @Max[A(X), 0] >= 0")[0].predicate
        'A'
    """
    masked = _mask_quotes(text)
    brace = masked.find("{")
    atoms = []
    for match in _NAME.finditer(masked):
        after = match.end()
        while after < len(masked) and masked[after].isspace():
            after += 1
        if after >= len(masked) or masked[after] != "(":
            continue
        before = masked[: match.start()].rstrip()
        if before.endswith("@") or match.group(0).upper() in ("MAX", "MIN"):
            continue
        args, _ = _arguments(masked, text, after + 1)
        atoms.append(
            AtomRef(
                text[match.start() : match.end()],
                args,
                before.endswith("!") or before.endswith("~"),
                _side_of(masked, match.start()),
                0 <= brace < match.start(),
            )
        )
    return atoms


def predicates_in(text: str) -> set[str]:
    """Upper-cased names of the predicates a rule uses.

    Examples:
        >>> sorted(predicates_in("1: a(X) & B(X) -> !a(X) ^2"))
        ['A', 'B']
    """
    return {atom.predicate.upper() for atom in rule_atoms(text)}


def rule_weight(text: str) -> float | None:
    """The weight written before ``:`` (None for a hard constraint or when none is written).

    Examples:
        >>> rule_weight("-2: A(X) -> B(X)")
        -2.0
    """
    match = _WEIGHT.match(text)
    return None if match is None else float(match.group(1).replace(" ", ""))
