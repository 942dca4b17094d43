"""swaptrace: what swapping DLRM embedding tables to an SSD costs, why, and what would make it cheaper.

The pipeline (one module per stage, see docs/architecture.md)::

    spec -> generate -> access trace -> emulate / capture -> swap I/O stream
         -> ssd (model) / fio (real disk) -> report
"""

__version__ = "0.8.1"

from swaptrace.markers import mark_step  # noqa: E402  (cheap: no heavy imports)

__all__ = ["__version__", "mark_step"]
