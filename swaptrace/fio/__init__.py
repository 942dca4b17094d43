"""fio stage: jobs from a swap I/O stream, a safe runner, parsed results.

Modules: :mod:`~swaptrace.fio.iolog` (v2 writer, v2/v3 reader, import),
:mod:`~swaptrace.fio.synthetic` (synthetic job), :mod:`~swaptrace.fio.jobs` (job
folder, validation), :mod:`~swaptrace.fio.runner` (fio discovery, target
safety, running), :mod:`~swaptrace.fio.results` (JSON / bw logs to Parquet),
:mod:`~swaptrace.fio.compare` (measured vs modelled ratios).

Every reader of a ``fio-results`` or ``fio-bwlog`` file imports :mod:`~swaptrace.fio.results`, which registers
the two kinds; the package itself imports nothing, so ``swaptrace fio --help`` stays light.
"""
