"""Example models that ship with pslbridge: MNIST-Addition's PSL programs, built through the public API.

:mod:`pslbridge.examples.mnist_addition` builds the paper's MNIST-Add1 and MNIST-Add2 programs for any list of
image pairs (rule files shipped as package data, data tables in memory) and the LeNet network; the demo and the
documentation use them, and so do the experiments in the repository.

Examples:
    >>> from pslbridge.examples import mnist_addition
    >>> mnist_addition.add1_spec([(0, 1)], [3]).predicate("Neural").neural.class_size
    10
"""
