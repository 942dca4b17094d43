"""Connecting to Dask distributed: a local cluster sized to the machine, or a scheduler's address.

Every task here is a long-running, GIL-releasing numba kernel, so each worker
is a process with one thread (``threads_per_worker=1``) and numba is held to
one thread inside it (:func:`single_threaded`): the cluster, not numba,
spreads the work over the cores.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

from swaptrace.errors import ConfigError

#: the environment variable Dask's own tools read for the scheduler's address
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
MISSING = "Dask is not installed; install the extra with: pip install 'swaptrace[dask]'"


def require_dask() -> Any:
    """Import ``dask.distributed`` or raise :class:`ConfigError` with the one-line install hint."""
    try:
        import distributed
    except ImportError:
        raise ConfigError(MISSING) from None
    return distributed


def scheduler_address(scheduler: str | None) -> str | None:
    """The address given, else ``$DASK_SCHEDULER_ADDRESS``, else ``None`` (start a local cluster)."""
    return scheduler or os.environ.get(SCHEDULER_ENV) or None


def default_workers() -> int:
    """Worker processes of a local cluster: the CPUs this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


@contextlib.contextmanager
def connect(workers: int | None = None, scheduler: str | None = None) -> Iterator[Any]:
    """A ``distributed.Client``: on ``scheduler`` (or ``$DASK_SCHEDULER_ADDRESS``), else on a new local cluster.

    Parameters
    ----------
    workers : int, optional
        Worker processes of the local cluster (default :func:`default_workers`);
        ignored with a scheduler.
    scheduler : str, optional
        ``tcp://HOST:PORT`` of a running ``dask scheduler``.
    """
    distributed = require_dask()
    address = scheduler_address(scheduler)
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if address is not None:
        _probe(address)
        try:
            client = distributed.Client(address, timeout="20s")
        except OSError as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {address} ({exc})") from None
        with client:
            yield client
        return
    # the workers start with Ctrl-C ignored (a disposition they inherit): the terminal sends SIGINT to the whole
    # process group, and only this process should answer it -- by closing the cluster -- not each worker with
    # its own traceback
    ignore = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if ignore else None
    try:
        # workers log only CRITICAL: on SIGTERM to the sweep alone a worker outlives its scheduler for a moment
        # and logs its failed heartbeat at ERROR with a traceback (seen once in seven clean-clone test runs);
        # a point that fails is reported by the sweep itself, in one line
        cluster = distributed.LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1,
                                           processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL)
    finally:
        if ignore:
            signal.signal(signal.SIGINT, old)
    interrupted = False
    try:
        with cluster, distributed.Client(cluster) as client:
            try:
                yield client
            except KeyboardInterrupt:
                # the interrupt's one line is the user's answer; the scheduler's complaints about the tasks
                # it drops while the cluster closes ("Couldn't gather keys") are not news to them
                interrupted = True
                logging.disable(logging.CRITICAL)
                raise
    finally:
        if interrupted:  # the cluster is closed by now: its threads log nothing more
            logging.disable(logging.NOTSET)


#: seconds to wait for a scheduler's TCP port to accept a connection
PROBE_TIMEOUT_S = 5.0


def _probe(address: str) -> None:
    """Fail at once when nothing listens at a ``tcp://``/``tls://`` scheduler address.

    ``distributed.Client`` retries a refused connection until its timeout (a scheduler may still be
    starting), so a wrong address cost 20 s before its error; a command given an address means a
    running scheduler, so one refused (or unanswered) connection is the answer. Other schemes are left
    to the Client.
    """

    from distributed.comm import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme not in ("tcp", "tls"):
        return
    try:
        host, port = parse_host_port(location)
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ConfigError(f"cannot reach the Dask scheduler at {address} ({reason})") from None


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Hold numba's parallel kernels to one thread while a task runs (the cluster gives one core per worker).

    numba's thread count is per calling thread; the previous count comes back on exit, so a task
    called in-process (tests, benchmarks) leaves the caller as it was.
    """
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)
