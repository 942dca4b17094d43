"""An SSD-model device fitted to a real drive (``swaptrace ssd fit``): the fit itself (``device``: its steps in
order and the TOML it writes; ``measurements``: what a ``fio run`` measured; ``reads`` and ``writes``: one
function per thing identified; ``priors``: what no measurement identifies), the fit checked on devices whose
parameters are known (``roundtrip``) and the fitted model against the drive on the pipeline's own stream
(``check``, the ``model-vs-fio`` stage).
"""
