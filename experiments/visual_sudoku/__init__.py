"""Visual Sudoku: the puzzle generator, the PSL model (``visual-sudoku.psl``) and the runner.

Run ``python -m experiments visual-sudoku``.
"""
