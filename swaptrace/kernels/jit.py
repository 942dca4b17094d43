"""numba options in one place (docs/architecture.md, "Layers").

``jit`` is for the integer state machines (cache policies, FTL, generator):
cached on disk, no fastmath. ``jit_stats`` may use fastmath, and only for
floating-point statistics where reassociation does not matter.
"""

from __future__ import annotations

import functools

import numba

jit = functools.partial(numba.njit, cache=True, nogil=True)
#: kernels that only read and write the arrays they are given (the emulator's, the miss-ratio curves'):
#: compiled without numba's reference counting. A call between two jitted functions otherwise increments and
#: decrements each array argument's count with atomic instructions that the refcount pruner does not remove
#: across a call; the emulator's fault path and the stack-distance pass are chains of such calls, and the
#: counting took a quarter of the emulator's time and half the exact curve's (benchmarks/bench_emulate.py,
#: 10^7 accesses: LRU at half the footprint 82 -> 60 ms, the exact curve 0.56 -> 0.29 s). A function compiled
#: so cannot allocate an array: numba refuses to compile one that does.
def _without_refcounts() -> dict[str, bool]:
    """``_nrt=False`` where numba has the option (a private name of its CPU target options); else nothing, and
    the kernels count references as every other numba function does: the same results, slower."""
    from numba.core import cpu

    return {"_nrt": False} if hasattr(cpu.CPUTargetOptions, "_nrt") else {}


jit_noref = functools.partial(numba.njit, cache=True, nogil=True, **_without_refcounts())
jit_parallel = functools.partial(numba.njit, cache=True, nogil=True, parallel=True)
jit_stats = functools.partial(numba.njit, cache=True, nogil=True, fastmath=True)
#: helpers of a kernel that take a large state tuple: inlined at numba IR level, since a call
#: would pass every array of the tuple as separate arguments (kernels/ssd/ftl.py: 2.8x slower as calls).
#: Inlining at IR level costs compile time (the caller is compiled with every helper in it), so kernels whose
#: helpers take plain arrays (the emulator's) use ``jit`` and leave inlining to LLVM: on a fresh clone the
#: emulator then compiles in 16 s of CPU instead of 44 s, and runs as fast (docs/benchmarks.md).
jit_inline = functools.partial(numba.njit, cache=True, nogil=True, inline="always")
