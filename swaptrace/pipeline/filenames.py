"""The names of the files a pipeline folder holds (``swaptrace run -o DIR``).

Read by :mod:`swaptrace.pipeline.run`, which writes them, and by
:mod:`swaptrace.pipeline.report`, which draws whatever of them a folder holds; kept
here, below both, so that the report does not import the pipeline.
"""

from __future__ import annotations

ACCESS = "access.parquet"
MRC_CSV, MRC_PNG = "mrc.csv", "mrc.png"
SWAPIO = "swapio.parquet"
SSD = "ssd.parquet"
THESIS = "ssd-thesis.json"
FIO_JOBS = "fio"
FIO_RUN = "fio-run"
REPORT = "report"
#: the time model's per-step table on the pipeline's SSD, and on this machine's disk (from fio's profile jobs)
TIMING, TIMING_DISK = "timing.parquet", "timing-disk.parquet"
#: ``swaptrace designs`` at the pipeline's budget (``run --designs``); the report shows every ``designs*/``
DESIGNS = "designs"
#: a real-kernel capture of the same trace, compared with the emulator's stream when present
KERNEL_STREAM = "kernel.swapio.parquet"
#: what each stage ran with (parameters and input fingerprints)
MANIFEST = "pipeline.json"
#: the SSD-model device fitted to the fio run's measurements, and the stream replayed on it and on the drive
FITTED_DEVICE, MODEL_VS_FIO = "fitted-device.toml", "model-vs-fio.json"
