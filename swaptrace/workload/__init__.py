"""The workload: what a DLRM training job keeps and touches. Model specs and presets (``spec``), the
address-space layout (``layout``), bounded Zipf (``zipf``), the lookups (``indices``), page-access traces
(``generate``), the rest of the process (``process``), exports for other simulators (``export``) and a
real PyTorch program to capture (``train``, ``swaptrace train``) and the same in TorchRec on FBGEMM's kernels
(``train_torchrec``, ``--framework torchrec``).
"""
