"""numba kernels: functions on arrays and scalars only, names prefixed ``_``.

Each kernel has a slow, obviously-correct twin in ``tests/naive*.py``.
"""
