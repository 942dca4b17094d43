"""numba kernels: functions on arrays and scalars only, one subpackage per stage.

A kernel's entry points, called by its stage's Python module, have plain names (``run_accesses``,
``draw_steps``, ``run_requests``); the helpers they inline into each other keep a leading ``_`` and are
used only inside their own subpackage. Each kernel has a slow, obviously-correct twin in
``tests/naive*.py``.
"""
