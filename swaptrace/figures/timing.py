"""Figures of the time model: predicted time per step, against the kernel's when a capture is there."""

from __future__ import annotations

import numpy as np


def plot_step_times(model: dict, ax=None, kernel_us=None, label: str = "model"):
    """Stacked predicted time per step (compute, fault wait, queueing, CPU), and the kernel's measured line.

    Parameters
    ----------
    model : dict of numpy arrays
        A ``timing-steps`` table (:func:`swaptrace.timing.model.write_steps`) read with ``read_all``.
    kernel_us : array-like, optional
        Measured wall time of each step (a capture's ``kernel.step_wall_us``), drawn as a line.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        ax = plt.figure().subplots()
    steps = np.asarray(model["step"])
    bottom = np.zeros(steps.size)
    cpu = np.asarray(model["fault_cpu_us"]) + np.asarray(model["reclaim_cpu_us"])
    for key, values in (("compute", model["compute_us"]), ("fault wait", model["fault_wait_us"]),
                        ("queueing", model["queue_us"]), ("kernel CPU", cpu)):
        v = np.asarray(values) / 1e3
        ax.bar(steps, v, bottom=bottom, width=0.9, label=f"{label}: {key}")
        bottom += v
    if kernel_us is not None:
        k = np.asarray(kernel_us, dtype=float) / 1e3
        ax.plot(steps[: k.size], k[: steps.size], "k.-", label="kernel (capture)")
    ax.set_xlabel("training step")
    ax.set_ylabel("time per step (ms)")
    ax.legend(fontsize="small")
    return ax
