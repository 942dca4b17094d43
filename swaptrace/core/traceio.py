"""Parquet files of every stage: schemas, an atomic streaming writer, a chunked reader.

Every swaptrace file is Parquet (zstd; access traces LZ4, see :data:`ENCODINGS`), written in row groups as it is
produced, to a temporary name in the same folder and renamed into place only
when complete (an interrupted command never leaves a half-written file under
the final name). Each file carries a JSON object under the key ``swaptrace``
in its Parquet key-value metadata and in its Arrow schema metadata (what
``pq.read_table(f).schema.metadata``, pandas and Polars read), with at least ``kind``,
``schema_version``, ``swaptrace_version`` and ``page_bytes``; it is written
when the file is closed, so it can hold summaries computed while writing.

Kinds and their columns (see docs/formats.md):

``access`` -- one row per page touched, in program order

    ====== ====== ==========================================================
    step   uint32 training iteration
    page   uint64 page number in the model's virtual address space
    write  bool   store (true) or load (false)
    region uint16 index into ``regions`` in the metadata
    event  uint8  optional: 0 access, 1 alloc, 2 free (absent: every row an access)
    zero   bool   optional: the store writes zeros (the page's contents are all zero after it)
    ====== ====== ==========================================================

``swapio`` -- one row per block request, in issue order

    ====== ============ ===================================================
    t_us   float64      issue time, microseconds from the start
    step   uint32       training iteration during which it was issued
    op     dict string  ``read``, ``write``, ``discard``
    offset uint64       byte offset on the swap device
    length uint32       bytes
    cause  dict string  ``fault``, ``readahead``, ``reclaim``, ``discard``
    ====== ============ ===================================================

``recording`` -- one row per memory event of a recorded program (``capture --record``; every column in
docs/formats.md): ``t_us``, ``step``, ``event`` (dict string, :data:`RECORD_EVENTS`), ``pid``, ``address``,
``length``, ``write``, ``flags``, ``old_address``, ``old_length``, ``referenced``, ``anonymous``

Other stages register their own kinds with :func:`register_kind`.

A **dataset** is a folder of such files (``part-*.parquet``, each a range of
steps, in order) with a sidecar ``_swaptrace.json`` holding the whole
trace's metadata and the list of parts; :func:`open_trace` opens it as it
opens one file, and pyarrow, DuckDB and Polars read the folder as one table
(they skip names that start with ``_`` or ``.``). Datasets are written to a
temporary sibling folder and renamed into place (:class:`DatasetWriter`).

Reading a trace elsewhere::

    import duckdb
    duckdb.sql("SELECT region, count(*) FROM 'traces/demo.access.parquet' GROUP BY 1")
"""

from __future__ import annotations

import base64
import contextlib
import functools
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from swaptrace.core.inputs import check_file

# the output rule's one owner is swaptrace.core.outputs; re-exported here for the writers below and their callers
from swaptrace.core.outputs import (  # noqa: F401 - PARTIAL_SUFFIX is re-exported
    PARTIAL_SUFFIX,
    check_output_folder,
    check_output_path,
    clear_stale_partials,
    install_folder,
    make_partial_folder,
    partial_name,
)
from swaptrace.core.signals import sigterm_as_interrupt
from swaptrace.core.version import __version__
from swaptrace.errors import TraceFileError

# Arrow's buffers from the C library's allocator, unless the user chose a pool (Arrow's own variable): with
# Arrow's default, mimalloc, a thread decoding a trace beside the emulator's kernel spent 20-60 ms of system
# time in a few of its row groups, in 5 to 8 of 12 runs (the kernel then waits for the batch); with the system
# allocator in none of 24, and generation to Parquet ran as fast (benchmarks/bench_emulate.py, bench_generate.py).
if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
    pa.set_memory_pool(pa.system_memory_pool())

SCHEMA_VERSION = 1
METADATA_KEY = b"swaptrace"

#: Canonical dictionaries of the swap I/O stream; kernels use these codes.
OPS = ("read", "write", "discard")
OP_READ, OP_WRITE, OP_DISCARD = 0, 1, 2
CAUSES = ("fault", "readahead", "reclaim", "discard", "unknown")
CAUSE_FAULT, CAUSE_READAHEAD, CAUSE_RECLAIM, CAUSE_DISCARD, CAUSE_UNKNOWN = 0, 1, 2, 3, 4

#: the ``event`` dictionary of a ``recording`` (``capture --record``); codes are the positions
RECORD_EVENTS = ("mmap", "munmap", "brk", "madvise", "mremap", "fault", "referenced", "fork", "exec", "exit")

_DICT = pa.dictionary(pa.int8(), pa.string())

ACCESS_SCHEMA = pa.schema(
    [("step", pa.uint32()), ("page", pa.uint64()), ("write", pa.bool_()), ("region", pa.uint16())]
)
#: the access trace's event codes (optional column ``event``; docs/formats.md): an access (load or store by
#: ``write``), an alloc (the address becomes valid again: no charge, no I/O) and a free (munmap,
#: MADV_DONTNEED: the page and its swap slot are released, no I/O)
EVENTS = ("access", "alloc", "free")
EVENT_ACCESS, EVENT_ALLOC, EVENT_FREE = 0, 1, 2
#: the emulator's per-row access codes (swaptrace.kernels.emulate.state.ACC_*): load, store, alloc, free, and a
#: store of zeros (a store whose row has ``zero`` set)
ACCESS_CODE_LOAD, ACCESS_CODE_STORE, ACCESS_CODE_ALLOC, ACCESS_CODE_FREE, ACCESS_CODE_ZERO_STORE = 0, 1, 2, 3, 4
#: per kind, columns a file may have beyond its schema (readers that ignore them read it as before). ``zero``
#: marks stores of zeros (``torch.zeros``, an optimizer's zeroed state): a reader that ignores it sees a store,
#: the emulator a page Linux >= 6.12 swaps without I/O while it stays zeros (docs/formats.md). A recording made
#: with ``--pageout`` has ``dirty``: a reading's bytes of the mapping written in its window (smaps Private_Dirty)
OPTIONAL_COLUMNS: dict[str, tuple[pa.Field, ...]] = {"access": (pa.field("event", pa.uint8()),
                                                                pa.field("zero", pa.bool_())),
                                                     "recording": (pa.field("dirty", pa.uint64()),)}

SWAPIO_SCHEMA = pa.schema(
    [
        ("t_us", pa.float64()),
        ("step", pa.uint32()),
        ("op", _DICT),
        ("offset", pa.uint64()),
        ("length", pa.uint32()),
        ("cause", _DICT),
    ]
)
RECORDING_SCHEMA = pa.schema(
    [
        ("t_us", pa.float64()),
        ("step", pa.uint32()),
        ("event", _DICT),
        ("pid", pa.int32()),
        ("address", pa.uint64()),
        ("length", pa.uint64()),
        ("write", pa.bool_()),
        ("flags", pa.uint64()),
        ("old_address", pa.uint64()),
        ("old_length", pa.uint64()),
        ("referenced", pa.uint64()),
        ("anonymous", pa.uint64()),
    ]
)

#: where pyarrow keeps the Arrow schema in a Parquet file's key-value metadata
ARROW_SCHEMA_KEY = "ARROW:schema"
#: kind -> Arrow schema. Stages add theirs with :func:`register_kind`.
KINDS: dict[str, pa.Schema] = {"access": ACCESS_SCHEMA, "swapio": SWAPIO_SCHEMA, "recording": RECORDING_SCHEMA}

#: dictionary-encoded columns and their canonical value lists, per kind
DICTIONARIES: dict[str, dict[str, tuple[str, ...]]] = {"swapio": {"op": OPS, "cause": CAUSES},
                                                      "recording": {"event": RECORD_EVENTS}}

DEFAULT_ROW_GROUP = 1 << 20

#: per kind, column -> (test of a batch's values, what they must be): damaged or foreign values are refused as
#: they are read, before a kernel wraps an offset of 2^63 or more to a negative int64 or sums a nan time
VALUE_CHECKS: dict[str, dict[str, tuple[Any, str]]] = {
    "swapio": {
        "offset": (lambda a, m: int(a.max()) < 1 << 63 and (a.dtype.kind == "u" or int(a.min()) >= 0),
                   "byte offsets in [0, 2^63)"),
        "t_us": (lambda a, m: bool(np.isfinite(a).all()), "finite times"),
        "length": (lambda a, m: a.dtype.kind == "u" or int(a.min()) >= 0, "non-negative lengths"),
    },
    "fio-results": {  # counts and rates fio reported: whole, finite, not negative (a missing percentile is nan)
        **{c: (lambda a, m: a.dtype.kind in "iu" and int(a.min()) >= 0 and int(a.max()) < 1 << 63,
               "whole numbers in [0, 2^63)") for c in ("ios", "io_bytes", "request_bytes")},
        **{c: (lambda a, m: bool((np.isfinite(a) & (a >= 0)).all()), "finite numbers >= 0")
           for c in ("iops", "bw_bytes")},
        **{c: (lambda a, m: not bool((np.isinf(a) | (a < 0)).any()), "numbers >= 0 (or nan: not measured)")
           for c in ("clat_p50_us", "clat_p99_us", "clat_p999_us", "runtime_ms", "trace_duration_ms",
                     "expected_ios")},
        # the instance names fio's own outputs in raw/ (raw/INSTANCE.json): a plain name, never a path
        "instance": (lambda a, m: all(isinstance(v, str) and v and "/" not in v and v not in (".", "..")
                                      for v in a), "plain job names"),
        "direction": (lambda a, m: all(v in ("read", "write", "trim") for v in a), "read, write or trim"),
    },
    "access": {
        "event": (lambda a, m: a.dtype.kind in "iu" and (a.dtype.kind == "u" or int(a.min()) >= 0)
                  and int(a.max()) <= EVENT_FREE, "event codes 0 (access), 1 (alloc) or 2 (free)"),
        # pages inside the footprint the metadata declares (the emulator sizes its tables by it)
        "page": (lambda a, m: (a.dtype.kind == "u" or int(a.min()) >= 0)
                 and ("footprint_pages" not in m or int(a.max()) < int(m["footprint_pages"])),
                 "pages inside the footprint (metadata footprint_pages)"),
    },
}


@dataclass(frozen=True)
class Encoding:
    """How a kind's columns are laid out in Parquet (the schema is the same whatever this says).

    ``codec`` and ``level`` name the page compression; ``column_encoding`` maps column names to a Parquet
    encoding (``DELTA_BINARY_PACKED``, ``BYTE_STREAM_SPLIT``, ``PLAIN``); ``dictionary`` lists the columns that
    are dictionary-encoded (None: every column, Parquet's default); ``statistics`` the columns whose pages carry
    min/max statistics (None: every column), which DuckDB and Polars use to skip row groups when filtering.
    Every reader decodes every choice here, so files written under other settings read the same.
    """

    codec: str = "zstd"
    level: int | None = None
    column_encoding: Mapping[str, str] | None = None
    dictionary: tuple[str, ...] | None = None
    statistics: tuple[str, ...] | None = None
    #: values the column writers take at a time (pyarrow's default is 1024); more cuts per-batch overhead
    batch_rows: int | None = None

    def writer_options(self, schema: pa.Schema) -> dict[str, Any]:
        """Keyword arguments of :class:`pyarrow.parquet.ParquetWriter` for a file of ``schema``."""
        names = set(schema.names)
        dictionary = (True if self.dictionary is None else
                      [n for n in self.dictionary if n in names] or False)
        statistics = (True if self.statistics is None else
                      [n for n in self.statistics if n in names] or False)
        encoding = {k: v for k, v in (self.column_encoding or {}).items() if k in names} or None
        return {"compression": self.codec, "compression_level": self.level, "use_dictionary": dictionary,
                "write_statistics": statistics, "column_encoding": encoding, "write_batch_size": self.batch_rows}


#: zstd at its default level, dictionaries and statistics everywhere: what every kind without its own entry
#: in :data:`ENCODINGS` gets
DEFAULT_ENCODING = Encoding()

#: Per kind, chosen by measuring (docs/benchmarks.md, "generate: Parquet encodings"). Access traces are the
#: long files, so their writer must keep pace with the generator: LZ4 (about 3x cheaper than zstd per byte),
#: ``page`` as DELTA_BINARY_PACKED (neighbouring accesses touch neighbouring pages, so most deltas take a few
#: bits: this makes the file smaller than zstd made it), no dictionaries (the ``page`` column has too many
#: distinct values for one; ``step`` and ``region`` change rarely and compress to almost nothing without)
#: and statistics on ``step`` (a reader filtering on a step range still skips row groups) and on the optional
#: ``event`` (a code out of range is refused as the file is opened, before any output is begun).
#: Swap I/O streams keep zstd and dictionaries on ``op`` and ``cause`` only: ``t_us`` and ``offset`` are nearly
#: all distinct, so a dictionary for them is built, overflows and is thrown away (10^5 rows: 18 ms and 1.05 MB
#: with dictionaries everywhere, 10 ms and 0.72 MB without those).
ENCODINGS: dict[str, Encoding] = {
    "access": Encoding(codec="lz4", column_encoding={"page": "DELTA_BINARY_PACKED"}, dictionary=(),
                       statistics=("step", "event"), batch_rows=1 << 16),
    "swapio": Encoding(dictionary=("op", "cause")),
}


def register_kind(kind: str, schema: pa.Schema, dictionaries: Mapping[str, tuple[str, ...]] | None = None,
                  encoding: Encoding | None = None) -> None:
    """Declare a file kind (e.g. ``ssd-timeline``) with its Arrow schema (and, optionally, its Parquet encoding)."""
    KINDS[kind] = schema
    if dictionaries:
        DICTIONARIES[kind] = dict(dictionaries)
    if encoding is not None:
        ENCODINGS[kind] = encoding


def _encode_column(values: Any, field: pa.Field, dictionary: tuple[str, ...] | None) -> pa.Array:
    if isinstance(values, pa.Array):
        return values
    if dictionary is not None:
        codes = np.asarray(values)
        if codes.dtype.kind not in "iu":
            index = {name: i for i, name in enumerate(dictionary)}
            codes = np.array([index[v] for v in codes], dtype=np.int8)
        # the codes through their buffer, as every plain column (pa.array would import pandas)
        return pa.DictionaryArray.from_arrays(_plain_array(codes.astype(np.int8, copy=False), pa.int8()),
                                              _string_array(dictionary))
    return _plain_array(np.asarray(values), field.type)


def _plain_array(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """An Arrow array over a numpy column of booleans or numbers, built from its buffers.

    ``pa.array`` imports pandas, when it is installed, at its first call with a numpy array (to look for pandas
    types): 0.17 s on the writing thread of every command's first chunk. Numbers of the field's own type are
    wrapped without a copy; booleans are packed into Arrow's bitmap; anything else goes through ``pa.array``.
    """
    if pa.types.is_boolean(type_) and values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(bits)])
    if values.dtype.kind in "iuf" and values.ndim == 1 and pa.from_numpy_dtype(values.dtype) == type_:
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))])
    return pa.array(values, type=type_)


@functools.cache
def _string_array(names: tuple[str, ...]) -> pa.Array:
    """A dictionary's names as an Arrow string array, built from its offsets and bytes (``pa.array`` of a list
    of strings imports pandas too)."""
    encoded = [n.encode() for n in names]
    offsets = np.zeros(len(names) + 1, np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(names), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


#: numpy dtypes of the Arrow number types (:func:`_plain_numpy`)
_NUMPY_OF_ARROW = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
                   pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
                   pa.float32(): np.float32, pa.float64(): np.float64}


def _plain_numpy(col: pa.Array) -> np.ndarray:
    """A numpy view of an Arrow array of numbers without nulls (a bitmap of booleans is unpacked).

    The inverse of :func:`_plain_array`, for the same reason: ``Array.to_numpy`` imports pandas when it is
    installed. Anything else goes through ``to_numpy``.
    """
    dtype = _NUMPY_OF_ARROW.get(col.type)
    if col.null_count == 0 and dtype is not None:
        return np.frombuffer(col.buffers()[1], dtype=dtype, count=len(col), offset=col.offset * np.dtype(dtype).itemsize)
    if col.null_count == 0 and pa.types.is_boolean(col.type):
        bits = np.frombuffer(col.buffers()[1], dtype=np.uint8)
        return np.unpackbits(bits, count=col.offset + len(col), bitorder="little")[col.offset:].view(np.bool_)
    return col.to_numpy(zero_copy_only=False)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class AtomicPath:
    """A temporary sibling of ``path`` that becomes ``path`` on :meth:`commit`.

    Used for any output (Parquet, CSV, PNG, JSON): write to the temporary,
    then commit; :meth:`discard` (or leaving a ``with`` block by an exception)
    deletes it. SIGTERM is turned into an exception while open, so a killed
    command cleans up too; after a SIGKILL the temporary
    (``.NAME.PID.RANDOM.partial``) stays until the next command writing
    ``path`` removes it (:func:`clear_stale_partials`). ``path`` is checked
    by :func:`check_output_path` (regular file or new name).
    """

    def __init__(self, path: str | os.PathLike, force: bool = True):
        self.path = check_output_path(path, force)
        clear_stale_partials(self.path)
        prefix, suffix = partial_name(self.path)
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=self.path.parent)
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would make every output private
        finally:
            os.close(fd)
        self.tmp = Path(tmp)
        self._done = False

    def commit(self) -> Path:
        # checked again at the last moment: a FIFO or device node made meanwhile is not replaced
        check_output_path(self.path, True)
        os.replace(self.tmp, self.path)
        self._done = True
        return self.path

    def discard(self) -> None:
        if not self._done:
            self.tmp.unlink(missing_ok=True)
            self._done = True

    def __enter__(self) -> AtomicPath:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and not self._done:
            try:
                self.commit()
            except BaseException:
                self.discard()
                raise
        else:
            self.discard()


class TraceWriter:
    """Stream record batches of one kind into a Parquet file, atomically.

    Examples
    --------
    >>> with TraceWriter("x.access.parquet", "access", {"page_bytes": 4096}) as w:  # doctest: +SKIP
    ...     w.write(step=steps, page=pages, write=writes, region=regions)
    ...     w.metadata["summary"] = {...}          # may be added until close
    """

    def __init__(
        self,
        path: str | os.PathLike,
        kind: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        force: bool = False,
        row_group_rows: int = DEFAULT_ROW_GROUP,
        optional: tuple[str, ...] = (),
    ):
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        self.kind = kind
        self.schema = KINDS[kind]
        for name in optional:  # optional columns (OPTIONAL_COLUMNS), after the kind's own
            extra = {f.name: f for f in OPTIONAL_COLUMNS.get(kind, ())}
            if name not in extra:
                raise ValueError(f"a {kind} file has no optional column {name!r}")
            self.schema = self.schema.append(extra[name])
        self.metadata: dict[str, Any] = {
            "kind": kind,
            "schema_version": SCHEMA_VERSION,
            "swaptrace_version": __version__,
        }
        self.metadata.update(metadata or {})
        self.row_group_rows = row_group_rows
        self.rows = 0
        self._atomic = AtomicPath(path, force)
        self.path = self._atomic.path
        options = ENCODINGS.get(kind, DEFAULT_ENCODING).writer_options(self.schema)
        self._writer = pq.ParquetWriter(self._atomic.tmp, self.schema, **options)
        # SIGTERM while the file is open: the temporary is removed (abort), as on Ctrl-C; closing restores it
        self._signals = contextlib.ExitStack()
        self._signals.enter_context(sigterm_as_interrupt())

    def write(self, **columns: Any) -> None:
        """Append rows given as one array per column (numpy arrays or codes)."""
        dictionaries = DICTIONARIES.get(self.kind, {})
        arrays = [_encode_column(columns[f.name], f, dictionaries.get(f.name)) for f in self.schema]
        n = len(arrays[0]) if arrays else 0
        if n == 0:
            return
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        self._writer.write_table(table, row_group_size=self.row_group_rows)
        self.rows += n

    def write_table(self, table: pa.Table) -> None:
        """Append an Arrow table that already has this kind's schema."""
        self._writer.write_table(table.cast(self.schema), row_group_size=self.row_group_rows)
        self.rows += table.num_rows

    def close(self) -> Path:
        """Write metadata, close and rename into place; returns the final path."""
        self.metadata["rows"] = self.rows
        text = json.dumps(self.metadata, default=_json_default)
        # The same JSON in the Arrow schema's metadata too, so ``pq.read_table(f).schema.metadata``, pandas and
        # Polars see it. pyarrow stores that schema, fixed when the writer opened, under ARROW:schema as a
        # base64 IPC message; a later key of the same name takes its place.
        schema = self.schema.with_metadata({METADATA_KEY: text})
        self._writer.add_key_value_metadata({METADATA_KEY: text,
                                             ARROW_SCHEMA_KEY: base64.b64encode(schema.serialize()).decode()})
        self._writer.close()
        self._restore_signal()
        try:
            return self._atomic.commit()
        except BaseException:
            self._atomic.discard()
            raise

    def abort(self) -> None:
        """Close and delete the temporary file; nothing appears under the final name."""
        try:
            self._writer.close()
        finally:
            self._atomic.discard()
            self._restore_signal()

    def _restore_signal(self) -> None:
        self._signals.close()  # a second call does nothing

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot store {type(obj).__name__} in metadata")


@contextlib.contextmanager
def damaged_data(path: str | os.PathLike) -> Iterator[None]:
    """Turn pyarrow's errors on data pages it cannot decode (a corrupt ZSTD frame or page header under a
    valid footer) into one :class:`TraceFileError` naming the file."""
    try:
        yield
    except (FileNotFoundError, PermissionError):
        raise
    except (OSError, pa.ArrowException) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise TraceFileError(f"{path}: its data is damaged ({first}); write the file again") from None


@dataclass(frozen=True)
class TraceFile:
    """An opened swaptrace Parquet file or dataset folder: its kind, metadata and a chunked reader.

    For a dataset, ``path`` is the folder and ``parts`` its part files in
    order; every reader below walks the parts in that order, so a dataset
    reads exactly as the single file it was split from.
    """

    path: Path
    kind: str
    meta: dict[str, Any]
    num_rows: int
    num_row_groups: int
    parts: tuple[Path, ...] = ()

    @property
    def page_bytes(self) -> int:
        return int(self.meta.get("page_bytes", 4096))

    @property
    def files(self) -> tuple[Path, ...]:
        """The Parquet files holding the rows, in order (the file itself, or a dataset's parts)."""
        return self.parts or (self.path,)

    def has_column(self, name: str) -> bool:
        """Whether every file of the trace has column ``name`` (an optional one, :data:`OPTIONAL_COLUMNS`).

        Raises
        ------
        TraceFileError
            Some parts of a dataset have it and others not.
        """
        have = [name in _parquet_file(part).schema_arrow.names for part in self.files]
        if any(have) and not all(have):
            raise TraceFileError(f"{self.path}: column {name!r} is in some parts and not in others")
        return bool(have) and all(have)

    def iter_batches(self, columns: list[str] | None = None, batch_rows: int = DEFAULT_ROW_GROUP, *,
                     threads: bool = True) -> Iterator[dict[str, np.ndarray]]:
        """Yield dicts of numpy arrays, ``batch_rows`` rows at a time (fewer at a row group's end; a batch never
        spans two parts of a dataset).

        ``threads``: decode a row group's columns on Arrow's thread pool (all cores); False decodes them in the
        calling thread, for a caller that decodes beside a kernel running on the other core.

        Dictionary columns come back as int8 codes into this kind's canonical
        dictionary (e.g. :data:`OPS`), whatever order the file stored them in.
        Reads one row group at a time and cuts the batches where pyarrow's
        ``ParquetFile.iter_batches`` does (tests/test_traceio.py compares them),
        whose reader keeps about a byte per row it has read (pyarrow 15-21), which
        made ``emulate`` and ``mrc`` grow with the trace's length.
        """
        for path in self.files:
            with damaged_data(path):
                pf = pq.ParquetFile(path)
            start = 0  # rows of this file before the row group
            for g in range(pf.num_row_groups):
                group = self._numpy_group(pf, g, columns, path, threads)
                n = len(next(iter(group.values()))) if group else 0
                # the batches pyarrow gave: cut at every multiple of batch_rows from the file's start and at
                # every row group's end
                cuts = [start, *range((start // batch_rows + 1) * batch_rows, start + n, batch_rows), start + n]
                for a, b in itertools.pairwise(cuts):
                    if b > a:
                        yield group if b - a == n else {k: v[a - start:b - start] for k, v in group.items()}
                start += n

    def _numpy_group(self, pf: pq.ParquetFile, index: int, columns: list[str] | None, path: Path,
                     threads: bool = True) -> dict[str, np.ndarray]:
        with damaged_data(path):
            table = pf.read_row_group(index, columns=columns, use_threads=threads)
        return self._to_numpy(table, path)

    def _to_numpy(self, batch: pa.RecordBatch | pa.Table, part: Path) -> dict[str, np.ndarray]:
        dictionaries = DICTIONARIES.get(self.kind, {})
        out: dict[str, np.ndarray] = {}
        for name, col in zip(batch.schema.names, batch.columns, strict=True):
            if isinstance(col, pa.ChunkedArray):
                col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
            if name in dictionaries:
                out[name] = _canonical_codes(col, dictionaries[name], part, name)
            else:
                out[name] = _plain_numpy(col)
            check = VALUE_CHECKS.get(self.kind, {}).get(name)
            if check is not None and len(out[name]) and not check[0](out[name], self.meta):
                raise TraceFileError(f"{part}: column {name!r} holds values that are not {check[1]}")
        return out

    def row_group_rows(self) -> np.ndarray:
        """Rows of each row group over all parts, in order (int64)."""
        sizes = []
        for part in self.files:
            md = pq.ParquetFile(part).metadata
            sizes.extend(md.row_group(i).num_rows for i in range(md.num_row_groups))
        return np.asarray(sizes, dtype=np.int64)

    def read_row_group(self, index: int, columns: list[str] | None = None) -> pa.Table:
        """Row group ``index`` counted over all parts in order, as an Arrow table."""
        for part in self.files:
            pf = pq.ParquetFile(part)
            if index < pf.num_row_groups:
                with damaged_data(part):
                    return pf.read_row_group(index, columns=columns)
            index -= pf.num_row_groups
        raise IndexError("row group out of range")

    def read_table(self) -> pa.Table:
        """All rows as one Arrow table (small files: results, fio runs), their values checked
        (:data:`VALUE_CHECKS`)."""
        tables = []
        for p in self.files:
            with damaged_data(p):
                tables.append(pq.read_table(p))
            self._to_numpy(tables[-1], p)
        return pa.concat_tables(tables)

    def read_all(self, columns: list[str] | None = None) -> dict[str, np.ndarray]:
        """Whole file as numpy arrays (for small files and tests)."""
        parts = list(self.iter_batches(columns))
        names = columns or list(KINDS[self.kind].names)
        if not parts:
            schema = KINDS[self.kind]
            return {n: np.empty(0, dtype=_numpy_dtype(schema.field(n).type)) for n in names}
        return {n: np.concatenate([p[n] for p in parts]) for n in names}


def access_columns(tf: TraceFile) -> list[str]:
    """The columns a replay of access trace ``tf`` reads: ``step``, ``page``, ``write``, and ``event`` and ``zero``
    where it has them."""
    return ["step", "page", "write", *[c for c in ("event", "zero") if tf.has_column(c)]]


def access_codes(batch: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per row of an access-trace batch, its access code (uint8 ``ACCESS_CODE_*``): the ``write`` flags as they
    are (bool, codes 0 and 1) when the batch has neither an ``event`` nor a ``zero`` column, else 0/1 for an
    access (load, store), 2 for an alloc, 3 for a free, 4 for a store with ``zero`` set."""
    write = batch["write"]
    event, zero = batch.get("event"), batch.get("zero")
    if event is None and zero is None:
        return write
    codes = write.astype(np.uint8)
    if zero is not None:  # a zero flag counts on stores only (an alloc or free row is never a store)
        np.putmask(codes, zero & write, ACCESS_CODE_ZERO_STORE)
    if event is not None:
        np.putmask(codes, event != EVENT_ACCESS, event.astype(np.uint8) + 1)
    return codes


def event_counts(tf: TraceFile) -> dict[str, int] | None:
    """``{"allocs", "frees", "freed_pages"}`` of access trace ``tf`` (``freed_pages``: distinct pages freed at
    least once), or None when it has no ``event`` column. One pass over ``page`` and ``event``."""
    if not tf.has_column("event"):
        return None
    allocs = frees = 0
    freed: list[np.ndarray] = []
    for batch in tf.iter_batches(["page", "event"]):
        ev = batch["event"]
        allocs += int(np.count_nonzero(ev == EVENT_ALLOC))
        is_free = ev == EVENT_FREE
        frees += int(np.count_nonzero(is_free))
        if is_free.any():
            freed = [np.unique(np.concatenate([*freed, batch["page"][is_free]]))]
    return {"allocs": allocs, "frees": frees, "freed_pages": int(freed[0].size) if freed else 0}


def _numpy_dtype(t: pa.DataType) -> np.dtype:
    if pa.types.is_dictionary(t):
        return np.dtype(np.int8)
    return np.dtype(t.to_pandas_dtype())


def _canonical_codes(col: pa.Array, canonical: tuple[str, ...], path: Path, name: str) -> np.ndarray:
    if pa.types.is_dictionary(col.type):
        values = col.dictionary.to_pylist()
        indices = _plain_numpy(col.indices)
    else:
        values, inverse = np.unique(np.asarray(col.to_pylist(), dtype=object), return_inverse=True)
        values, indices = list(values), inverse
    lookup = np.empty(len(values), dtype=np.int8)
    for i, value in enumerate(values):
        if value not in canonical:
            raise TraceFileError(f"{path}: column {name!r} has value {value!r}; expected one of {', '.join(canonical)}")
        lookup[i] = canonical.index(value)
    return lookup[indices] if len(values) else np.empty(len(col), dtype=np.int8)


def open_trace(path: str | os.PathLike, kind: str | tuple[str, ...] | None = None) -> TraceFile:
    """Open a swaptrace Parquet file, checking its kind and columns.

    Parameters
    ----------
    path : path-like
        The file, or a dataset folder (module docstring).
    kind : str or tuple of str, optional
        Accepted kind(s); ``None`` accepts any known kind.

    Raises
    ------
    TraceFileError
        Missing or unreadable file, no swaptrace metadata, wrong kind, or
        missing columns -- the message names the file and what is wrong.
    """
    p = Path(path)
    if not os.path.lexists(p):
        raise TraceFileError(f"{p}: no such file")
    if p.is_dir():
        return _open_dataset(p, kind)
    check_file(p, "Parquet file")  # a FIFO would block the read forever
    pf = _parquet_file(p)
    kv = pf.metadata.metadata or {}
    if METADATA_KEY not in kv:
        raise TraceFileError(f"{p}: no swaptrace metadata (not written by swaptrace?)")
    try:
        meta = json.loads(kv[METADATA_KEY])
    except ValueError:
        raise TraceFileError(f"{p}: swaptrace metadata is not valid JSON") from None
    if not isinstance(meta, dict):
        raise TraceFileError(f"{p}: swaptrace metadata is not a JSON object")
    file_kind = _check_kind(p, meta, kind)
    _check_meta(p, meta)
    _check_columns(p, file_kind, pf.schema_arrow)
    _check_statistics(p, pf, file_kind, meta)
    return TraceFile(p, file_kind, meta, pf.metadata.num_rows, pf.metadata.num_row_groups)


def _parquet_file(p: Path) -> pq.ParquetFile:
    """``pq.ParquetFile(p)``, its errors (not Parquet, cut short) as one line naming the file."""
    try:
        return pq.ParquetFile(p)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for non-Parquet or truncated input
        raise TraceFileError(f"{p}: not a Parquet file, or cut short ({(str(exc).splitlines() or ['?'])[0]})") \
            from None


def _check_kind(p: Path, meta: dict[str, Any], kind: str | tuple[str, ...] | None) -> str:
    file_kind = meta.get("kind")
    wanted = (kind,) if isinstance(kind, str) else kind
    if wanted is not None and file_kind not in wanted:
        raise TraceFileError(f"{p}: is a {file_kind!r} file; expected {' or '.join(repr(k) for k in wanted)}")
    return file_kind


#: metadata counts every reader takes as whole numbers in [0, 2^63)
_META_COUNTS = ("footprint_pages", "footprint_bytes", "steps", "first_step", "device_bytes", "memory_bytes", "rows")


#: metadata sections every reader takes as JSON objects (or absent): a stream's summary, a fio run's settings and
#: ratios, a capture's kernel readings, a process trace's runtime, the options a file was made with
_META_OBJECTS = ("summary", "run", "ratios", "kernel", "process", "params")


def _check_meta(p: Path, meta: dict[str, Any]) -> None:
    """The metadata fields readers compute with are of their type and range (a damaged or hand-edited file
    is refused here in one line, not as a ZeroDivisionError deep in a stage)."""
    def bad(key: str, what: str) -> TraceFileError:
        return TraceFileError(f"{p}: metadata {key} = {meta[key]!r} is not {what}")

    page = meta.get("page_bytes", 4096)
    if isinstance(page, bool) or not isinstance(page, int) or not 512 <= page <= 1 << 30 or page & (page - 1):
        raise bad("page_bytes", "a power of two from 512 to 1 GiB")
    for key in _META_COUNTS:
        v = meta.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 63):
            raise bad(key, "a whole number in [0, 2^63)")
    v = meta.get("duration_us")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf")):
        raise bad("duration_us", "a finite time >= 0")
    if "regions" in meta and not (isinstance(meta["regions"], list)
                                  and all(isinstance(r, dict) for r in meta["regions"])):
        raise bad("regions", "a list of regions")
    for key in _META_OBJECTS:  # null stands for "none" (a fio run's ratios), except a summary
        if key in meta and not isinstance(meta[key], dict) and (meta[key] is not None or key == "summary"):
            raise bad(key, "an object")


def _check_columns(p: Path, kind: str, schema: pa.Schema) -> None:
    """The kind's columns are there, each of the kind's type or one read the same way (another integer width,
    a float for a float, a plain string for a dictionary): ``t_us`` stored as strings is refused here."""
    if kind not in KINDS:
        return
    missing = [n for n in KINDS[kind].names if n not in schema.names]
    if missing:
        raise TraceFileError(f"{p}: {kind} file lacks column(s) {', '.join(missing)}")
    for want in (*KINDS[kind], *(f for f in OPTIONAL_COLUMNS.get(kind, ()) if f.name in schema.names)):
        have = schema.field(want.name).type
        if not _same_family(want.type, have):
            raise TraceFileError(f"{p}: column {want.name!r} is {have}; a {kind} file has {want.type}")


def _check_statistics(p: Path, pf: pq.ParquetFile, kind: str, meta: dict[str, Any]) -> None:
    """:data:`VALUE_CHECKS` on the row groups' stored minimum and maximum, where the writer kept them: a value
    out of range is refused when the file is opened, before any stage has printed or written a thing (the
    same check runs again on the values as they are read, for files written without statistics)."""
    checks = VALUE_CHECKS.get(kind, {})
    names = pf.schema_arrow.names
    for g in range(pf.metadata.num_row_groups):
        rg = pf.metadata.row_group(g)
        for name, (test, what) in checks.items():
            if name not in names:
                continue
            st = rg.column(names.index(name)).statistics
            if st is None or not st.has_min_max:
                continue
            try:
                ends = np.asarray([st.min, st.max])
            except (TypeError, ValueError):
                continue
            if ends.dtype.kind in "iuf" and not test(ends, meta):
                raise TraceFileError(f"{p}: column {name!r} holds values that are not {what}")


def _same_family(want: pa.DataType, have: pa.DataType) -> bool:
    t = pa.types
    if want.equals(have):
        return True
    if t.is_dictionary(want):
        return (t.is_dictionary(have) and t.is_string(have.value_type)) or t.is_string(have)
    if t.is_integer(want):
        return t.is_integer(have)
    if t.is_floating(want):
        return t.is_floating(have)
    return False


#: a dataset folder's sidecar: the whole trace's metadata and its parts in order
DATASET_SIDECAR = "_swaptrace.json"
DATASET_FORMAT = "swaptrace-dataset"


def _open_dataset(p: Path, kind: str | tuple[str, ...] | None) -> TraceFile:
    sidecar = p / DATASET_SIDECAR
    if not sidecar.is_file():
        raise TraceFileError(f"{p}: is a folder without {DATASET_SIDECAR} (not a swaptrace dataset)")
    try:
        doc = json.loads(sidecar.read_text())
        meta, parts = doc["meta"], doc["parts"]
        names = [(str(part["file"]), int(part["rows"])) for part in parts]
        if not isinstance(meta, dict) or any("/" in n or n.startswith(".") for n, _ in names):
            raise ValueError
    except (ValueError, KeyError, TypeError, OSError):
        raise TraceFileError(f"{sidecar}: not a swaptrace dataset sidecar") from None
    file_kind = _check_kind(p, meta, kind)
    _check_meta(p, meta)
    files, rows, groups = [], 0, 0
    for name, want_rows in names:
        f = p / name
        if not f.is_file():
            raise TraceFileError(f"{p}: part {name} is missing")
        check_file(f, "dataset part")
        pf = _parquet_file(f)  # a part cut short fails here, naming the part
        md = pf.metadata
        if md.num_rows != want_rows:
            raise TraceFileError(f"{f}: has {md.num_rows} rows; the sidecar says {want_rows}")
        _check_columns(f, file_kind, pf.schema_arrow)  # every part: one of another kind is refused too
        _check_statistics(f, pf, file_kind, meta)
        files.append(f)
        rows += md.num_rows
        groups += md.num_row_groups
    return TraceFile(p, file_kind, meta, rows, groups, tuple(files))


#: what identifies the trace a file was made from (the metadata keys two inputs of one run must share)
FINGERPRINT_KEYS = ("preset", "seed", "first_step", "footprint_pages", "page_bytes")


def trace_fingerprint(meta: dict[str, Any]) -> dict[str, Any]:
    """The keys of :data:`FINGERPRINT_KEYS` an access trace's metadata has (stored in the streams made from it)."""
    return {k: meta[k] for k in FINGERPRINT_KEYS if k in meta}


def check_agree(a: TraceFile, b: TraceFile, keys: tuple[str, ...], a_name: str, b_name: str, why: str) -> None:
    """Refuse two inputs that must describe the same thing and do not: each of ``keys`` both metadata hold
    must be equal (``why`` says what they must share, for the message)."""
    for k in keys:
        if k in a.meta and k in b.meta and a.meta[k] != b.meta[k]:
            raise TraceFileError(f"{b_name} {b.path}: its {k} is {b.meta[k]!r}, {a_name}'s is {a.meta[k]!r}; "
                                 f"{why}")


def is_dataset(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a dataset folder (has the sidecar)."""
    return (Path(path) / DATASET_SIDECAR).is_file()


class DatasetWriter:
    """Build a dataset folder in a temporary sibling, then rename it into place.

    Parts are written (by any process that sees the folder) into
    :attr:`tmp` under names from :meth:`part_path`; :meth:`commit` writes the
    sidecar listing them in order and renames the folder to its final name
    (replacing an old dataset only with ``force``). Leaving a ``with`` block
    by an exception deletes the temporary folder.
    """

    def __init__(self, path: str | os.PathLike, force: bool = False):
        self.path = check_output_folder(path, force, is_dataset, "a swaptrace dataset")
        self.tmp = make_partial_folder(self.path)
        self._done = False

    @staticmethod
    def part_name(index: int, first_step: int, steps: int) -> str:
        """A part's file name; zero-padded so names sort in step order."""
        return f"part-{index:05d}-steps-{first_step:010d}-{first_step + steps:010d}.parquet"

    def commit(self, meta: dict[str, Any], parts: list[dict[str, Any]]) -> Path:
        """Write the sidecar (``parts``: dicts with ``file`` and ``rows``, in order) and rename into place."""
        doc = {"format": DATASET_FORMAT, "meta": meta, "parts": parts}
        (self.tmp / DATASET_SIDECAR).write_text(json.dumps(doc, default=_json_default, indent=1))
        stale = [DATASET_SIDECAR]
        if is_dataset(self.path):  # --force: the old parts go; anything else in the folder stays
            with contextlib.suppress(ValueError, KeyError, TypeError, OSError):
                stale += [str(p["file"]) for p in json.loads((self.path / DATASET_SIDECAR).read_text())["parts"]]
        install_folder(self.tmp, self.path, stale, last=DATASET_SIDECAR)
        self._done = True
        return self.path

    def discard(self) -> None:
        if not self._done:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self._done = True

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The swaptrace metadata of a file (any kind)."""
    return open_trace(path).meta
