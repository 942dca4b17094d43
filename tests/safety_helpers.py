"""Small inputs shared by the misuse tests (test_output_paths, test_bad_inputs, test_partials).

Everything here is made once per module from the `tiny` preset at two steps, so the tables of bad
inputs stay fast: an access trace, its swap I/O stream, a fio job folder, a fio iolog and the kinds of
broken Parquet file a user can hand us.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner, Result

from swaptrace.cli import cli


def invoke(*args) -> Result:
    """``swaptrace ARGS...`` in this process, stderr kept apart from stdout."""
    return CliRunner().invoke(cli, [str(a) for a in args])


def snapshot(folder: Path) -> set[str]:
    """Every path under ``folder`` (recursively), relative, to compare before and after a command."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} | {"."} if folder.exists() else set()


def special_file(kind: str, path: Path) -> Path:
    """Make a FIFO, a character device (a copy of /dev/null), a socket or a link to one at ``path``."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "chardev":
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    elif kind == "blockdev":
        os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(7, 250))  # a loop minor no one uses; never opened
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif kind == "link-to-chardev":
        special_file("chardev", path.with_name(path.name + ".target"))
        path.symlink_to(path.name + ".target")
    elif kind == "dangling-link":
        path.symlink_to(path.name + ".nowhere")
    else:
        raise ValueError(kind)
    return path


SPECIAL_KINDS = ("fifo", "chardev", "blockdev", "socket", "link-to-chardev", "dangling-link")


def file_type(path: Path) -> str:
    """What ``path`` is now (without following a link), to check a refused output was left alone."""
    mode = os.lstat(path).st_mode
    for test, name in ((stat.S_ISLNK, "link"), (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "chardev"),
                       (stat.S_ISBLK, "blockdev"), (stat.S_ISSOCK, "socket"), (stat.S_ISREG, "file"),
                       (stat.S_ISDIR, "folder")):
        if test(mode):
            return name
    return "?"


def make_inputs(base: Path) -> dict[str, Path]:
    """The shared inputs under ``base`` (made with the CLI itself, so they are what users have)."""
    base.mkdir(parents=True, exist_ok=True)
    access, stream, jobs = base / "t.access.parquet", base / "t.swapio.parquet", base / "jobs"
    r = invoke("generate", "--preset", "tiny", "--steps", 2, "-o", access)
    assert r.exit_code == 0, r.output
    r = invoke("emulate", access, "--memory-fraction", "0.3", "-o", stream)
    assert r.exit_code == 0, r.output
    r = invoke("fio", "jobs", stream, "-o", jobs, "--max-requests", 200, "--sweep", "4k,8k")
    assert r.exit_code == 0, r.output
    iolog = base / "ok.iolog"
    iolog.write_text("fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x write 0 4096\n/dev/x read 4096 8192\n"
                     "/dev/x close\n")
    plain = base / "plain.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), plain)
    corrupt = base / "corrupt.access.parquet"
    shutil.copyfile(access, corrupt)
    _corrupt_data_pages(corrupt)
    not_parquet = base / "text.parquet"
    not_parquet.write_text("not a parquet file\n")
    empty = base / "empty.parquet"
    empty.write_bytes(b"")
    folder = base / "a-folder.parquet"
    folder.mkdir()
    return {"access": access, "stream": stream, "jobs": jobs, "iolog": iolog, "plain": plain,
            "corrupt": corrupt, "text": not_parquet, "empty": empty, "folder": folder, "base": base}


def fake_run_dir(path: Path) -> Path:
    """A `fio run` results folder holding results.parquet with two sweep rows (fio itself is for the fio tests)."""
    from swaptrace.core.traceio import TraceWriter
    from swaptrace.fio import results as res

    path.mkdir()
    rows = [{"instance": n, "job": n, "group": "sweep", "kind": "sweep", "direction": d, "request_bytes": 4096,
             "pattern": "random", "io_bytes": 409600, "ios": 100, "bw_bytes": 4.096e6, "iops": 1000.0,
             "clat_p50_us": 900.0, "clat_p99_us": 2000.0, "clat_p999_us": 3000.0, "runtime_ms": 100.0,
             "trace_duration_ms": float("nan"), "expected_ios": float("nan")}
            for n, d in (("sweep_read_4k", "read"), ("sweep_write_4k", "write"))]
    with TraceWriter(path / res.RESULTS_NAME, "fio-results", {"run": {"target": "t.dat"}, "ratios": {}}) as w:
        w.write_table(res.rows_to_table(rows))
    return path


def _corrupt_data_pages(path: Path) -> None:
    """Overwrite the middle of the column chunks with junk, keeping the footer (and so the metadata) valid."""
    meta = pq.ParquetFile(path).metadata
    rg = meta.row_group(0)
    col = rg.column(1)  # `page`: the largest chunk
    start = col.data_page_offset + 64
    length = max(16, col.total_compressed_size // 2)
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(bytes((i * 37 + 11) % 256 for i in range(length)))
