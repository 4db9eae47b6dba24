"""MNIST-Addition (the paper's Add1 and Add2): the runner, its presets (``presets/*.yaml``) and ``NOTES.md``.

The model is the library's :mod:`pslbridge.examples.mnist_addition`; run ``python -m experiments mnist-add``.
"""
