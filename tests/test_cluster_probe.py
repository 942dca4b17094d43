"""A scheduler address that nothing listens at fails at once, not after Dask's 20 s of retries."""

from __future__ import annotations

import socket
import time

import pytest

from swaptrace.errors import ConfigError
from swaptrace.parallel import cluster

pytest.importorskip("distributed", reason="the dask extra is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_address_fails_fast():
    address = f"tcp://127.0.0.1:{_free_port()}"  # bound and released: nothing listens there
    start = time.monotonic()
    with pytest.raises(ConfigError, match="cannot reach the Dask scheduler at tcp://127.0.0.1"):
        with cluster.connect(scheduler=address):
            pass
    # a refused connection returns at once; the bound is the probe's own timeout (Dask's retries took 20 s)
    assert time.monotonic() - start < cluster.PROBE_TIMEOUT_S


def test_listening_address_passes_the_probe():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        cluster._probe(f"tcp://127.0.0.1:{server.getsockname()[1]}")  # raises if it could not connect


def test_other_schemes_are_left_to_dask():
    cluster._probe("inproc://nowhere/1/2")  # not a TCP address: nothing to probe
