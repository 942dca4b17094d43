"""The input rule's file end: every file a command reads is opened here, checked before it is read.

An input is a regular file (a link to one is fine): a FIFO would block the read forever, a device node
could be huge, a folder is not a file. TOML and JSON are parsed here into one-line errors that name the
file; their values are then checked by their readers (``swaptrace.core.bounds`` for numbers that are also
options). Parquet inputs go through :func:`swaptrace.core.traceio.open_trace`, which calls :func:`check_file`.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from swaptrace.errors import TraceFileError

#: the largest text input read whole (TOML, JSON): far above any spec, profile or fio output
MAX_TEXT_BYTES = 256 << 20


def check_file(path: str | os.PathLike, what: str = "file") -> Path:
    """``path`` if it is an existing regular file (or a link to one); else a one-line error naming it.

    Parameters
    ----------
    path : path-like
        The input.
    what : str
        What the command wanted there ("device TOML", "trace"), for the message.
    """
    p = Path(path)
    if not str(path).strip():
        raise TraceFileError(f"{what}: empty path; give a file")
    try:
        st = p.stat()
    except FileNotFoundError:
        raise TraceFileError(f"{p}: no such file") from None
    except OSError as exc:
        raise TraceFileError(f"{p}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceFileError(f"{p}: is a folder; expected a {what}")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or
                stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise TraceFileError(f"{p}: is {kind}; a {what} must be a regular file")
    if not os.access(p, os.R_OK):
        raise TraceFileError(f"{p}: is not readable")
    return p


def check_named_file(path: str | os.PathLike, what: str, missing: str, error: type[Exception]) -> Path:
    """``path``, a file the user named for ``what``, checked by :func:`check_file` with the caller's error type.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the command wanted there, for :func:`check_file`'s messages ("model spec (TOML)").
    missing : str
        The noun of the message when nothing is there: ``PATH: no such MISSING``.
    error : exception type
        Raised with the one-line message (a loader's own error type, e.g. ``SpecError``).
    """
    p = Path(path)
    if not os.path.lexists(p):
        raise error(f"{p}: no such {missing}")
    try:
        return check_file(p, what)  # a FIFO would block the read
    except TraceFileError as exc:
        raise error(str(exc)) from None


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """The whole text of a small input file (UTF-8), checked first."""
    p = check_file(path, what)
    if p.stat().st_size > MAX_TEXT_BYTES:
        raise TraceFileError(f"{p}: {p.stat().st_size} bytes is too large for a {what}")
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise TraceFileError(f"{p}: is not UTF-8 text (not a {what}?)") from None


def read_toml(path: str | os.PathLike, what: str = "TOML file", invalid: str = "not valid TOML") -> dict[str, Any]:
    """A TOML file as a dict; one line naming the file (``PATH: INVALID (why)``) if it cannot be parsed."""
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TraceFileError(f"{path}: {invalid} ({exc})") from None


def read_json(path: str | os.PathLike, what: str = "JSON file", invalid: str = "not valid JSON") -> Any:
    """A JSON file's value; one line naming the file (``PATH: INVALID (why)``) if it cannot be parsed."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise TraceFileError(f"{path}: {invalid} ({exc})") from None
