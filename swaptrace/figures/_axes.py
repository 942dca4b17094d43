"""The one helper every figure module shares."""

from __future__ import annotations


def axes_or_new(ax, figsize: tuple[float, float] = (7, 3.5)):
    """``ax`` itself, or the Axes of a new pyplot figure of ``figsize`` inches when ``ax`` is None."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figsize)
    return ax
