"""Work spread over a Dask cluster: trace generation by step ranges and parameter sweeps.

This layer sits between the commands and the pipeline: it imports the stages
and the pipeline's stage helpers, and nothing below imports it. Dask is an
optional extra (``pip install 'swaptrace[dask]'``); :mod:`.cluster` says so
in one line when it is missing.
"""
