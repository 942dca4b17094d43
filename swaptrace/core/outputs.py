"""The output rule: a command writes only the paths it names, and loses nothing it was not asked to.

Every command that writes goes through this module, so the rule has one owner:

- **A file output** is a new name or an existing regular file (or a link to one); an existing file needs
  ``--force``. A device node, FIFO, socket, a link to one of those, a dangling link, a folder or an empty name
  is refused whatever ``--force`` says (:func:`check_output_path`).
- **A folder output** is new, empty, or recognisably the command's own: it holds the marker the command
  writes (``manifest.json`` of kind ``fio-jobs``, ``pipeline.json``, ``report.md``, ...). Any other folder is
  refused, ``--force`` or not: ``--force`` replaces what the command itself writes, never a folder of the
  user's files (:func:`check_output_folder`). The new contents are built in a temporary sibling and moved in
  name by name (:func:`install_folder`), so files the command does not write stay where they are.
- **Inputs are never outputs**: an output may not be (by its real path, links and ``..`` resolved, or by its
  inode: a hard link) a file the command reads, lie inside a folder it reads (a dataset, a run folder), or be
  a folder holding one of its inputs; and two outputs of one command never share a path
  (:func:`check_distinct`). Every file a command reads counts, whether named by an argument or an option
  (``swaptrace.commands.common.writes`` declares them).
- Outputs are written under a temporary name (``.NAME.PID.RANDOM.partial``) and renamed when complete; the
  temporary's name is kept within the file system's 255-byte limit (:func:`partial_name`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from swaptrace.errors import OutputError

#: suffix of every temporary output; the part before it names the owner's pid (see :func:`partial_name`)
PARTIAL_SUFFIX = ".partial"
#: the longest file name (bytes) Linux file systems take (NAME_MAX, include/uapi/linux/limits.h)
NAME_MAX = 255


def describe_special(st: os.stat_result) -> str | None:
    """What a non-regular file is ("a FIFO", "a character device", ...), or None for a regular file."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _check_name(out: Path, what: str) -> None:
    if len(os.fsencode(out.name)) > NAME_MAX:
        raise OutputError(f"{str(out)[:60]}...: the {what} name is longer than {NAME_MAX} bytes; give a shorter one")


def reachable(path: str | os.PathLike) -> Path:
    """``path`` as the kernel can reach it once its folder exists: unchanged, unless its folder is spelled with
    ``..`` after folders that do not exist (``sub/../x``), which is then resolved (``./x``).

    Creating the folder ``sub/..`` would make ``sub`` only to step back out of it: an empty folder left behind
    that nothing asked for. The kernel resolves ``sub/..`` only if ``sub`` exists; the name means ``./x``.
    """
    out = Path(path)
    parent = out.parent
    if ".." in parent.parts and not os.path.isdir(parent):
        return Path(os.path.realpath(parent)) / out.name
    return out


def _named(path: str | os.PathLike, field: str, noun: str, instead: str) -> tuple[Path, os.stat_result | None]:
    """An output's name checked (not empty, a name the file system takes) and what is there now: ``None`` for
    nothing, else the ``stat`` of what a symbolic link points to (a link to a device is refused like the
    device); a dangling link is refused, naming ``instead`` as what to give. The path is returned
    :func:`reachable` (``sub/../x`` as ``x`` when ``sub`` does not exist: no folder made to step out of)."""
    if not str(path).strip():
        raise OutputError(f"output {field} is empty; give a {noun} name")
    out = reachable(path)
    _check_name(out, noun)
    if not os.path.lexists(out):
        return out, None
    try:
        return out, out.stat()
    except OSError:
        raise OutputError(f"{out}: is a dangling symbolic link; give {instead} or a new name") from None


def check_output_path(path: str | os.PathLike, force: bool) -> Path:
    """Refuse a file output that is not a regular file or a new name, an existing one without ``force``,
    or a folder we cannot write into.

    Every file a command writes passes here (through ``traceio.AtomicPath``), so this is the one place that
    keeps ``-o /dev/null --force`` or ``-o FIFO --force`` from replacing a device node or special file.
    """
    out, st = _named(path, "path", "file", "a regular file")
    if st is not None:
        kind = describe_special(st)
        if kind == "a folder":
            raise OutputError(f"{out}: is a folder; give a file name")
        if kind is not None:
            raise OutputError(f"{out}: is {kind}; outputs must be regular files or new names")
        if not force:
            raise OutputError(f"{out}: exists; pass --force to overwrite")
    ensure_writable_parent(out.parent if str(out.parent) else Path("."))
    return out


def check_output_folder(path: str | os.PathLike, force: bool = False, owned: Callable[[Path], bool] | None = None,
                        what: str = "a swaptrace output") -> Path:
    """Refuse a folder output unless it is new, empty, or ``owned`` (holds this command's marker).

    Parameters
    ----------
    path : path-like
        The folder the command writes.
    force : bool
        Whether an existing folder of the command's own may be rewritten. Commands whose reruns are the
        normal case (``run``) pass True.
    owned : callable, optional
        ``owned(folder) -> bool``: whether an existing, non-empty folder is recognisably this command's
        (without it, no non-empty folder is).
    what : str
        What the command writes there, for the message ("a fio job folder").

    Returns
    -------
    Path
        The folder; its parent is created.
    """
    out, st = _named(path, "folder", "folder", "a folder")
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{out}: exists and is not a folder")
        entries = sorted(p.name for p in out.iterdir() if not p.name.endswith(PARTIAL_SUFFIX))
        if entries and (owned is None or not owned(out)):
            shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
            raise OutputError(f"{out}: holds files that are not {what} ({shown}); give a new or empty folder "
                              "(--force replaces only swaptrace's own outputs)")
        if entries and not force:
            raise OutputError(f"{out}: exists ({what}); pass --force to replace it")
    ensure_writable_parent(out.parent if str(out.parent) else Path("."))
    return out


def ensure_writable_parent(parent: Path) -> None:
    """Create ``parent`` if missing; refuse one that is not a writable folder."""
    if not parent.exists():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{parent}: cannot create folder ({exc.strerror})") from None
    if not parent.is_dir():
        raise OutputError(f"{parent}: is not a folder")
    if not os.access(parent, os.W_OK):
        raise OutputError(f"{parent}: folder is not writable")


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.fspath(path)))


#: the most files of an input folder compared with an output by inode (a hard link); past it, a folder's
#: paths are still compared, its files' inodes not
MAX_FOLDER_FILES = 100_000


def _file_id(path: str | os.PathLike) -> tuple[int, int] | None:
    """``(device, inode)`` of the regular file at ``path`` (links followed), or None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _folder_file_ids(folder: Path) -> dict[tuple[int, int], Path]:
    """``{(device, inode): file}`` of the regular files under ``folder`` (links inside it not followed)."""
    found: dict[tuple[int, int], Path] = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            if len(found) >= MAX_FOLDER_FILES:
                return found
            p = Path(root) / name
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.setdefault((st.st_dev, st.st_ino), p)
    return found


def check_distinct(outputs: Mapping[str, str | os.PathLike | None],
                   inputs: Mapping[str, str | os.PathLike | None] | None = None) -> None:
    """Refuse outputs that are inputs, lie inside an input folder, hold an input, or share a path.

    Parameters
    ----------
    outputs, inputs : mapping
        ``{option name: path}`` (``None`` values are skipped); the names appear in the message, e.g.
        ``{"-o": out, "--save-costs": costs}``. Paths are compared by their real paths (links resolved, ``..``
        taken as the kernel takes it), so a link to the input, or ``./sub/../input``, is the input; an existing
        output is also compared by its inode, so a hard link to an input (or to a file in an input folder) is
        the input. An input folder (a dataset, a run folder) counts with every file in it: an output may not
        lie inside it, and an output folder may not hold an input, file or folder.
    """
    outs = {k: _real(v) for k, v in outputs.items() if v is not None and str(v).strip()}
    ins = {k: _real(v) for k, v in (inputs or {}).items() if v is not None and str(v).strip()}
    seen: dict[Path, str] = {}
    for name, p in outs.items():
        if p in seen:
            raise OutputError(f"{name} and {seen[p]} name the same path ({outputs[name]}); give each its own")
        seen[p] = name
    in_ids: dict[tuple[int, int], tuple[str, Path | None]] = {}  # filled only if an output exists (a hard link)
    out_ids = {k: _file_id(o) for k, o in outs.items()}
    if any(out_ids.values()):
        for iname, i in ins.items():
            if i.is_dir():
                for fid, f in _folder_file_ids(i).items():
                    in_ids.setdefault(fid, (iname, f))
            elif (fid := _file_id(i)) is not None:
                in_ids.setdefault(fid, (iname, None))
    for oname, o in outs.items():
        for iname, i in ins.items():
            if o == i:
                raise OutputError(f"{oname} {outputs[oname]}: is the input {iname}; the command would destroy "
                                  "what it reads -- give another output")
            if i.is_dir() and i in o.parents:
                raise OutputError(f"{oname} {outputs[oname]}: lies inside the input {iname} ({inputs[iname]}), "
                                  "a folder the command reads; give an output outside it")
            if o in i.parents:
                raise OutputError(f"{oname} {outputs[oname]}: holds the input {iname} ({inputs[iname]}); give "
                                  "an output folder that does not hold what the command reads")
        if out_ids[oname] in in_ids:
            iname, inside = in_ids[out_ids[oname]]
            what = f"the input {iname}" + (f"'s file {inside}" if inside is not None else f" ({inputs[iname]})")
            raise OutputError(f"{oname} {outputs[oname]}: is a hard link to {what}; the command would destroy "
                              "what it reads -- give another output")


def partial_stem(name: str) -> str:
    """The part of a temporary name that stands for the output ``name``: the name itself, or, when the
    temporary's name would pass :data:`NAME_MAX` bytes, its start and a hash of the whole (still unique)."""
    room = NAME_MAX - 40  # ".", ".PID.", mkstemp's 8 random characters, ".partial" and a margin
    if len(os.fsencode(name)) <= room:
        return name
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    head = os.fsencode(name)[: room - 17].decode("utf-8", "ignore")
    return f"{head}~{digest}"


def partial_name(path: Path) -> tuple[str, str]:
    """``(prefix, suffix)`` for ``tempfile.mkstemp``/``mkdtemp``: the temp name carries our pid."""
    return f".{partial_stem(path.name)}.{os.getpid()}.", PARTIAL_SUFFIX


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def clear_stale_partials(path: str | os.PathLike) -> list[Path]:
    """Remove temporary siblings of ``path`` left by a killed run (their owner pid no longer lives).

    Temporary names are ``.NAME.PID.RANDOM.partial`` (files or folders); a SIGKILLed command cannot
    remove its own, so the next command writing the same output does. Returns what was removed.
    """
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    removed = []
    prefix = f".{partial_stem(out.name)}."
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(PARTIAL_SUFFIX)):
            continue
        pid_text = name[len(prefix):-len(PARTIAL_SUFFIX)].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _pid_alive(int(pid_text)):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed.append(entry)
        except OSError:
            pass  # another process got there first, or no right to: leave it
    return removed


def make_partial_folder(path: str | os.PathLike) -> Path:
    """A temporary sibling folder of output folder ``path`` (installed by :func:`install_folder`).

    Clears stale partial folders of ``path`` first, as ``traceio.AtomicPath`` does for files.
    """
    out = reachable(path)
    parent = out.parent if str(out.parent) else Path(".")
    clear_stale_partials(out)
    prefix, suffix = partial_name(out)
    return Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))


def install_folder(tmp: Path, final: Path, stale: Iterable[str] = (), last: str | None = None) -> None:
    """Move the finished contents of ``tmp`` into ``final``; what the command did not write stays.

    A new ``final`` is one rename. Into an existing folder (one :func:`check_output_folder` passed), each
    entry of ``tmp`` replaces the entry of the same name (a sub-folder whole: the command wrote it), then
    the ``stale`` names -- the command's own earlier outputs it did not write again -- are removed, and the
    marker ``last`` (e.g. ``manifest.json``) moves in last, so an interrupted install is never taken for a
    complete one. Anything else in ``final`` (the user's notes, an earlier ``runs/``) is left alone.
    """
    final = reachable(final)
    if not final.exists():
        os.replace(tmp, final)
        return
    names = sorted(p.name for p in tmp.iterdir())
    for name in [n for n in names if n != last]:
        _replace_entry(tmp / name, final / name)
    for old in stale:  # after the new files, before the marker
        if old in names or not old or "/" in old or old in (".", ".."):
            continue
        target = final / old
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
    if last in names:
        _replace_entry(tmp / last, final / last)
    shutil.rmtree(tmp, ignore_errors=True)


def _replace_entry(src: Path, dst: Path) -> None:
    """``src`` under the name ``dst``: a file by one rename, a folder by moving the old one aside first."""
    if dst.is_dir() and not dst.is_symlink():
        aside = Path(tempfile.mkdtemp(prefix=f".{partial_stem(dst.name)}.{os.getpid()}.", suffix=PARTIAL_SUFFIX,
                                      dir=dst.parent))
        os.replace(dst, aside / "old")
        os.replace(src, dst)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(src, dst)


def json_marker(name: str, keys: tuple[str, ...], *, any_of: bool = False) -> Callable[[Path], bool]:
    """The ``owned`` test of :func:`check_output_folder` for a folder whose marker is a JSON object swaptrace wrote.

    A file of the user's that happens to carry the marker's name is not enough: the marker must be a regular file
    holding a JSON object with every one of ``keys`` (with ``any_of``, at least one of them), as the command writes it.
    """
    def owned(folder: Path) -> bool:
        import json

        p = Path(folder) / name
        try:
            if not stat.S_ISREG(p.stat().st_mode) or p.stat().st_size > 64 << 20:
                return False
            value = json.loads(p.read_bytes().decode("utf-8"))
        except (OSError, ValueError):
            return False
        if not isinstance(value, dict):
            return False
        found = [k in value for k in keys]
        return any(found) if any_of else all(found)

    return owned


def text_marker(name: str, first_line: str) -> Callable[[Path], bool]:
    """The ``owned`` test for a folder whose marker is a text file swaptrace wrote, known by its first line."""
    def owned(folder: Path) -> bool:
        p = Path(folder) / name
        try:
            if not stat.S_ISREG(p.stat().st_mode):
                return False
            with open(p, "rb") as fh:
                return fh.read(len(first_line.encode())).decode("utf-8", "replace") == first_line
        except OSError:
            return False

    return owned
