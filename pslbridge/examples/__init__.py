"""Example models that ship with pslbridge.

- :mod:`pslbridge.examples.mnist_addition` builds the paper's MNIST-Add1 and MNIST-Add2 programs for any list of
  image pairs (rule files shipped as package data, data tables in memory) and the LeNet network; the demo and
  the documentation use them, and so do the experiments in the repository.
- ``simple-acquaintances`` (after PSL's own examples) in all three of PSL's file forms: a runtime config
  (``simple-acquaintances.json``), a ``.psl`` rule file with its CLI ``.data`` file, and the data tables;
  :func:`example_path` gives its folder.

Examples:
    >>> from pslbridge.examples import mnist_addition
    >>> mnist_addition.add1_spec([(0, 1)], [3]).predicate("Neural").neural.class_size
    10
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MODELS", "example_path"]

_HERE = Path(__file__).resolve().parent
#: The example models shipped as files, by name.
MODELS = ("simple-acquaintances",)


def example_path(name: str) -> Path:
    """Return the folder of a model shipped with pslbridge.

    Args:
        name: One of :data:`MODELS`.

    Returns:
        The folder inside the installed package.

    Raises:
        KeyError: An unknown name.

    Examples:
        >>> import pslbridge
        >>> folder = example_path("simple-acquaintances")
        >>> with pslbridge.Bridge(folder / "simple-acquaintances.json") as bridge:
        ...     bridge.target_predicates
        ['Knows']
    """
    if name not in MODELS:
        raise KeyError(f"no example model {name!r}; pslbridge ships {list(MODELS)}")
    return _HERE / name
