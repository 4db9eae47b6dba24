"""Argument types for the runners' command lines: bad values stop the run before any work, with the reason.

Example:
    >>> positive_int("3")
    3
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an integer >= 1, got '0'
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = [
    "DefaultsHelpFormatter",
    "non_negative_float",
    "non_negative_int",
    "open_unit_interval",
    "positive_float",
    "positive_int",
    "temperatures",
    "unit_interval",
]


def positive_int(text: str) -> int:
    """An integer >= 1.

    Example:
        >>> positive_int("12")
        12
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0.

    Example:
        >>> non_negative_int("0")
        0
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0.

    Example:
        >>> positive_float("1e-3")
        0.001
    """
    return _float_where(text, lambda value: 0 < value < float("inf"), "a number > 0")


def temperatures(text: str) -> tuple[float, ...]:
    """Comma-separated finite numbers > 0, in the order given (temperatures; the first wins ties).

    Example:
        >>> temperatures("1,0.25, 0.1")
        (1.0, 0.25, 0.1)
        >>> temperatures("1,0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected comma-separated numbers > 0, got '1,0'
    """
    try:
        values = tuple(positive_float(part) for part in text.split(","))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers > 0, got {text!r}") from None
    return values


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (0 turns the feature off).

    Example:
        >>> non_negative_float("0")
        0.0
        >>> non_negative_float("-1e-4")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected a finite number >= 0, got '-1e-4'
    """
    return _float_where(text, lambda value: 0.0 <= value < float("inf"), "a finite number >= 0")


def unit_interval(text: str) -> float:
    """A number in [0, 1) (a momentum; 0 turns the feature off).

    Example:
        >>> unit_interval("0.99")
        0.99
        >>> unit_interval("1")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected a number in [0, 1), got '1'
    """
    return _float_where(text, lambda value: 0.0 <= value < 1.0, "a number in [0, 1)")


def open_unit_interval(text: str) -> float:
    """A number strictly between 0 and 1 (a share of a weight that both parts must keep).

    Example:
        >>> open_unit_interval("0.95")
        0.95
        >>> open_unit_interval("0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected a number in (0, 1), got '0'
    """
    return _float_where(text, lambda value: 0.0 < value < 1.0, "a number in (0, 1)")


def _float_where(text: str, accept: Callable[[float], bool], expected: str) -> float:
    """``text`` as a float that ``accept`` takes; otherwise an argparse error saying what was ``expected``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Shows each option's default in its help, except ``None`` (an option whose default depends on others).

    What :class:`argparse.ArgumentDefaultsHelpFormatter` does, less its ``(default: None)``.

    Example:
        >>> parser = argparse.ArgumentParser(prog="p", formatter_class=DefaultsHelpFormatter)
        >>> _ = parser.add_argument("--steps", type=int, default=50, help="steps")
        >>> _ = parser.add_argument("--hops", type=int, help="hops (default: 2; Cora 6)")
        >>> help_text = " ".join(parser.format_help().split())
        >>> "steps (default: 50)" in help_text, "(default: None)" in help_text
        (True, False)
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, argparse.SUPPRESS) or "%(default)" in text:
            return action.help
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return f"{text} (default: %(default)s)"
        return action.help
