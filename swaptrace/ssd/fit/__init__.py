"""An SSD-model device fitted to a real drive (``swaptrace ssd fit``): the fit itself (``device``), the
fit checked on devices whose parameters are known (``roundtrip``) and the fitted model against the drive
on the pipeline's own stream (``check``, the ``model-vs-fio`` stage).
"""
