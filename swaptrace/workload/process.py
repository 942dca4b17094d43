"""The whole training process, not only the model: a runtime profile and what it adds to a trace.

A real training process holds more than its model. Its framework and interpreter keep an anonymous
resident set of their own (hundreds of MiB for PyTorch on the CPU), most of it idle once start-up is
over; it writes every table and optimizer-state array while it builds the model; and every step it
allocates buffers (activations, gradients, autograd and allocator state) beside the model's own
scratch. Under a whole-process memory limit (a memory cgroup) the kernel's LRU lists see all of it, and
the idle part of the runtime is what goes to swap first (mm/vmscan.c ages the inactive anonymous list
in allocation order: the runtime was written first and is not touched again).

:class:`RuntimeProfile` states those amounts for one runtime; :func:`process_layout` appends its
regions after the model's; :func:`with_process` turns the model's access chunks into the process's:

* **step 0 is the start-up**: stores to every runtime page (the framework is loaded first), then to
  every page the program initialises while building the model, in allocation order: tables, dense
  weights, and optimizer state where the optimizer allocates it in its constructor; then to the
  runtime's active part again (the training loop is set up after the model is built);
* **training step k is step k + 1**, and begins with stores to the runtime's active pages and to the
  per-step buffers, then the model's own accesses of step k.

So step numbers match ``capture -- CMD`` of the same program (its start-up is step 0 and its mark N is
step N + 1, ``step_offset = 1``). The emulator treats ``--memory`` of such a trace as the whole-process
limit and subtracts the page cache and kernel memory the profile says the group holds.

Profiles are TOML (``swaptrace/profiles/runtime/*.toml`` ship; ``swaptrace runtime-profile`` derives one
from a ``capture -- CMD`` of a short run). Which fields a profile must state and which default is one rule,
held in one table, :data:`PROFILE_FIELDS` (see :func:`profile_from_dict`).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swaptrace.core.toml_text import toml_comment as _comment
from swaptrace.core.toml_text import toml_string
from swaptrace.core.units import format_bytes
from swaptrace.errors import ConfigError

if TYPE_CHECKING:  # numpy loads where arrays are made, so the constants import light
    import numpy as np

#: region kinds the process adds after the model's
RUNTIME_KINDS = ("runtime", "step-buffers")
#: optimizers whose torch implementation allocates (and writes) its state when it is constructed;
#: the others allocate it lazily at the first step (torch.optim.Adagrad fills ``state_sum`` in
#: ``__init__``; SGD has none; SparseAdam/Adam create ``exp_avg``/``exp_avg_sq`` in the first ``step``)
EAGER_STATE_OPTIMIZERS = ("adagrad", "rowwise-adagrad")
#: optimizers whose state starts as zeros, written as zeros where it is allocated: torch.optim.Adagrad fills
#: ``state_sum`` with ``initial_accumulator_value`` (0 unless given; ``swaptrace train`` does not give it),
#: SparseAdam/Adam use ``torch.zeros_like``, the row-wise Adagrad of ``swaptrace train`` ``torch.zeros``. A
#: state page stays zeros until a step updates a row on it, and Linux >= 6.12 swaps such a page without I/O
ZERO_STATE_OPTIMIZERS = ("adagrad", "rowwise-adagrad", "adam")
#: region kinds holding an optimizer's state
STATE_KINDS = ("table-state", "mlp-state")
#: the largest amount a profile may state (the same cap as every size option)
MAX_BYTES = 1 << 60
#: the largest write cost (the bound of ``emulate --write-cost``)
MAX_WRITE_COST = 1 << 20
#: marks a field a profile must state (:data:`PROFILE_FIELDS`)
REQUIRED = None
#: the default of a field that takes the profile file's stem (``name``)
STEM = "<the file's stem>"


@dataclass(frozen=True)
class ProfileField:
    """One field of a runtime profile: what it is, its kind, and its default (:data:`REQUIRED`: none)."""

    what: str
    kind: str  # "bytes" (a whole number in [0, MAX_BYTES]), "cost" (whole, [0, MAX_WRITE_COST]) or "text"
    default: Any = REQUIRED


#: every field of a profile, in file order. The rule: a **measurement** (each ``*_bytes``) is required, since no
#: default could stand for what a program holds; a **setting** (``write_cost``) and the **labels** (``name``,
#: ``measured_on``) default as stated here
PROFILE_FIELDS: dict[str, ProfileField] = {
    "name": ProfileField("the profile's name", "text", default=STEM),
    "measured_on": ProfileField("the program, machine and capture the numbers were read from", "text", default=""),
    "runtime_bytes": ProfileField("anonymous memory of the runtime besides the model after start-up", "bytes"),
    "active_bytes": ProfileField("part of the runtime touched in every training step", "bytes"),
    "step_bytes": ProfileField("buffers allocated during every step above the start-up's resident set", "bytes"),
    "file_bytes": ProfileField("page cache the process's group holds while training (charged to the limit)",
                               "bytes"),
    "kernel_bytes": ProfileField("kernel memory charged to the group (page tables, slab)", "bytes"),
    "write_cost": ProfileField("the emulator's write cost for this runtime (0: the kernel profile's ensemble)",
                               "cost", default=0),
}
#: the byte fields of a profile, and what each is (the measurements of :data:`PROFILE_FIELDS`)
BYTE_FIELDS = {k: f.what for k, f in PROFILE_FIELDS.items() if f.kind == "bytes"}


@dataclass(frozen=True)
class RuntimeProfile:
    """What a runtime holds besides the model (bytes), and where the numbers came from.

    Attributes
    ----------
    name : str
    runtime_bytes, active_bytes, step_bytes, file_bytes, kernel_bytes : int
        See :data:`BYTE_FIELDS`; ``active_bytes <= runtime_bytes``.
    write_cost : int
        The emulator's write cost for this runtime's processes (pages reclaim isolates in the time the
        device writes one page, ``emulate --write-cost``); 0: the kernel profile's ensemble. A framework
        computes between the pages it touches far longer than the capture's replayer, so the device keeps
        up with reclaim; the shipped profile states what it was chosen on.
    measured_on : str
        The program, machine and capture the numbers were read from.
    source : str
        The file it was loaded from.
    """

    name: str
    runtime_bytes: int
    active_bytes: int
    step_bytes: int
    file_bytes: int
    kernel_bytes: int
    write_cost: int = 0
    measured_on: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _runtime_dir():
    return resources.files("swaptrace") / "profiles" / "runtime"


def list_runtime_profiles() -> list[str]:
    """Names of the shipped runtime profiles."""
    return sorted(p.name[:-5] for p in _runtime_dir().iterdir() if p.name.endswith(".toml"))


def profile_from_dict(data: dict[str, Any], where: str) -> RuntimeProfile:
    """Check a profile's fields and build it; a :class:`ConfigError` of one line names the field.

    One rule, one table (:data:`PROFILE_FIELDS`): a field the table marks :data:`REQUIRED` (the five
    measurements, ``*_bytes``) must be present; any other field may be left out and takes the table's default
    (``write_cost`` 0, ``measured_on`` empty, ``name`` the file's stem). Present fields are checked by kind:
    bytes are whole numbers in [0, 2^60], the write cost a whole number in [0, 2^20], labels strings; and
    ``active_bytes <= runtime_bytes``. Unknown keys are refused (they are usually typos).
    """
    unknown = sorted(set(data) - set(PROFILE_FIELDS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(PROFILE_FIELDS)})")
    values: dict[str, Any] = {}
    for key, field in PROFILE_FIELDS.items():
        v = data.get(key)
        if v is None:
            if field.default is REQUIRED:
                raise ConfigError(f"{where}: {key} is missing ({field.what}; a measurement has no default)")
            v = Path(where).stem if field.default is STEM else field.default
        elif field.kind == "bytes" and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BYTES):
            raise ConfigError(f"{where}: {key} must be a whole number of bytes in [0, 2^60], got {v!r}")
        elif field.kind == "cost" and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_WRITE_COST):
            raise ConfigError(f"{where}: {key} must be a whole number in [0, {MAX_WRITE_COST}] (0: the kernel "
                              f"profile's), got {v!r}")
        elif field.kind == "text" and not isinstance(v, str):
            raise ConfigError(f"{where}: {key} must be a string, got {v!r}")
        values[key] = v
    if values["active_bytes"] > values["runtime_bytes"]:
        raise ConfigError(f"{where}: active_bytes ({format_bytes(values['active_bytes'])}) is above runtime_bytes "
                          f"({format_bytes(values['runtime_bytes'])})")
    return RuntimeProfile(source=where, **values)


def is_recording(text: str) -> bool:
    """Whether ``--runtime`` names a Parquet file (then it must be a recording, ``generate --runtime``
    checks its ``kind``: swaptrace.capture.process_trace)."""
    p = Path(text)
    if p.suffix == ".parquet":
        return True
    try:  # a regular file only: a FIFO is never opened
        if not p.is_file():
            return False
        with open(p, "rb") as f:
            return f.read(4) == b"PAR1"
    except OSError:
        return False


def load_runtime_profile(name_or_path: str | Path) -> RuntimeProfile:
    """A shipped profile by name (``pytorch-cpu``) or a TOML file."""
    text = str(name_or_path)
    path = Path(text)
    if not path.suffix:
        shipped = _runtime_dir() / f"{text}.toml"
        if not shipped.is_file():
            raise ConfigError(f"--runtime: no runtime profile {text!r} (shipped: {', '.join(list_runtime_profiles())};"
                              " or give a .toml file)")
        raw, where = shipped.read_bytes(), f"runtime profile {text}"
    else:  # a file: checked (a FIFO is never read) and parsed by the input rule
        from swaptrace.core.inputs import read_toml

        return profile_from_dict(read_toml(path, "runtime profile"), str(path))
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{where}: not valid TOML ({str(exc).splitlines()[0]})") from None
    return profile_from_dict(data, where)


def to_toml(profile: RuntimeProfile, comments: dict[str, str] | None = None) -> str:
    """The profile as TOML, a comment above each field (what it is, and how it was measured).

    Strings are escaped as TOML basic strings (:func:`toml_string`: a name with a quote, a backslash or a
    newline reads back as it was) and comments have their control characters replaced by spaces (a comment
    ends at a newline).
    """
    comments = comments or {}
    lines = [_comment(f"runtime profile: what {profile.name} holds besides the model (swaptrace.workload.process)"),
             f"name = {toml_string(profile.name)}", f"measured_on = {toml_string(profile.measured_on)}", ""]
    for key, field in PROFILE_FIELDS.items():
        if field.kind == "text":
            continue
        value = getattr(profile, key)
        shown = f": {format_bytes(value)}" if field.kind == "bytes" else ""
        lines.append(_comment(f"{field.what}{shown}" + (f"; {comments[key]}" if key in comments else "")))
        lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


# ---- the trace ---------------------------------------------------------------------------------------------------
def _pages(nbytes: int, page_bytes: int) -> int:
    return -(-nbytes // page_bytes)


def process_layout(regions: list[dict[str, Any]], footprint_pages: int, page_bytes: int,
                   profile: RuntimeProfile) -> tuple[list[dict[str, Any]], int]:
    """The model's regions plus the runtime's (appended in address order), and the new footprint in pages."""
    out = list(regions)
    next_page = footprint_pages
    for name, nbytes in (("runtime", profile.runtime_bytes), ("step-buffers", profile.step_bytes)):
        pages = _pages(nbytes, page_bytes)
        if pages:
            out.append({"name": name, "kind": name, "first_page": next_page, "pages": pages})
            next_page += pages
    return out, next_page


def startup_pages(regions: list[dict[str, Any]], optimizer: str) -> np.ndarray:
    """Pages stored to at start-up, in order: the runtime, then the model's arrays as a program allocates them.

    Tables and dense weights are initialised when the model is built; optimizer state only where the
    optimizer allocates it in its constructor (:data:`EAGER_STATE_OPTIMIZERS`); activations (``scratch``)
    and the per-step buffers first at step 1.
    """
    import numpy as np

    kinds = ["runtime", "table", "mlp"]
    if optimizer in EAGER_STATE_OPTIMIZERS:
        kinds += ["table-state", "mlp-state"]
    parts = [np.arange(r["first_page"], r["first_page"] + r["pages"], dtype=np.uint64)
             for kind in kinds for r in regions if r["kind"] == kind]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)


def zero_stores(step: np.ndarray, write: np.ndarray, region: np.ndarray, regions: list[dict[str, Any]],
                optimizer: str) -> np.ndarray:
    """Which rows of a process trace store zeros: start-up's (step 0) stores to optimizer state that starts as
    zeros (:data:`ZERO_STATE_OPTIMIZERS`); a training step's stores to state are updates of its rows.

    Parameters
    ----------
    step, write, region : numpy arrays
        Rows of a process trace (start-up is step 0).
    regions : list of dict
        The process's regions (their ``kind``).
    optimizer : str
        The spec's optimizer.

    Returns
    -------
    numpy.ndarray of bool
        True where the row is a store of zeros (the trace's optional ``zero`` column).
    """
    import numpy as np

    if optimizer not in ZERO_STATE_OPTIMIZERS:
        return np.zeros(step.size, dtype=bool)
    state = np.array([r["kind"] in STATE_KINDS for r in regions], dtype=bool)
    return (step == 0) & write & state[region.astype(np.int64)]


def active_pages(regions: list[dict[str, Any]], profile: RuntimeProfile, page_bytes: int) -> np.ndarray:
    """The runtime's active part: ``active_bytes`` of its pages spread evenly over it, in address order.

    A runtime's heap interleaves what it keeps using with what it used once (module objects, import-time
    buffers), so its active pages are spread over the whole of it, not one end: reclaim that takes a
    share of the runtime at start-up takes about the same share of its active part.
    """
    import numpy as np

    for r in regions:
        if r["kind"] == "runtime":
            n = min(r["pages"], _pages(profile.active_bytes, page_bytes))
            picks = (np.arange(n, dtype=np.uint64) * np.uint64(r["pages"])) // np.uint64(max(n, 1))
            return np.uint64(r["first_page"]) + picks
    return np.zeros(0, dtype=np.uint64)


def step_pages(regions: list[dict[str, Any]], profile: RuntimeProfile, page_bytes: int) -> np.ndarray:
    """Pages stored to at the start of every training step: the runtime's active part, then the step buffers."""
    import numpy as np

    buffers = [np.arange(r["first_page"], r["first_page"] + r["pages"], dtype=np.uint64)
               for r in regions if r["kind"] == "step-buffers"]
    return np.concatenate([active_pages(regions, profile, page_bytes), *buffers])


def _region_of(pages: np.ndarray, regions: list[dict[str, Any]]) -> np.ndarray:
    import numpy as np

    firsts = np.array([r["first_page"] for r in regions], dtype=np.uint64)
    return (np.searchsorted(firsts, pages, side="right") - 1).astype(np.uint16)


def with_process(chunks: Iterator[tuple[np.ndarray, ...]], regions: list[dict[str, Any]], profile: RuntimeProfile,
                 optimizer: str, page_bytes: int, chunk_rows: int) -> Iterator[tuple[np.ndarray, ...]]:
    """The process's access chunks from the model's: start-up as step 0, model step k as step k + 1.

    Parameters
    ----------
    chunks : iterator of (step, page, write, region) arrays
        The model's trace in program order (steps ascending; a step may span chunks).
    regions : list of dict
        The process's regions (:func:`process_layout`).
    profile, optimizer, page_bytes, chunk_rows
        The runtime, the spec's optimizer, the page size, and the most rows a start-up chunk holds.

    Yields
    ------
    tuple of numpy arrays
        ``(step uint32, page uint64, write bool, region uint16)``, fresh arrays.
    """
    import numpy as np

    # the training loop is set up after the model is built (first batch drawn, kernels loaded, optimizer
    # ready): it uses the runtime's active part again before the first step
    boot = np.concatenate([startup_pages(regions, optimizer), active_pages(regions, profile, page_bytes)])
    boot_regions = _region_of(boot, regions)
    for i in range(0, boot.size, chunk_rows):
        n = min(chunk_rows, boot.size - i)
        yield (np.zeros(n, dtype=np.uint32), boot[i:i + n], np.ones(n, dtype=bool), boot_regions[i:i + n])
    every = step_pages(regions, profile, page_bytes)
    every_regions = _region_of(every, regions)
    last_step = -1
    for st, pg, wr, rg in chunks:
        if st.size == 0:
            continue
        # the first row of every step not begun in an earlier chunk gets the step's runtime stores before it
        starts = np.flatnonzero(np.r_[st[0] != last_step, st[1:] != st[:-1]])
        last_step = int(st[-1])
        if every.size == 0 or starts.size == 0:
            yield (st + np.uint32(1), pg.copy(), wr.copy(), rg.copy())
            continue
        pieces: list[tuple[np.ndarray, ...]] = []
        bounds = list(starts) + [st.size]
        if starts[0] > 0:
            pieces.append((st[:starts[0]], pg[:starts[0]], wr[:starts[0]], rg[:starts[0]]))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            pieces.append((np.full(every.size, st[a], dtype=np.uint32), every, np.ones(every.size, dtype=bool),
                           every_regions))
            pieces.append((st[a:b], pg[a:b], wr[a:b], rg[a:b]))
        yield _joined(pieces)


def _joined(pieces: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    import numpy as np

    step = np.concatenate([p[0] for p in pieces]).astype(np.uint32) + np.uint32(1)
    return (step, np.concatenate([p[1] for p in pieces]).astype(np.uint64),
            np.concatenate([p[2] for p in pieces]).astype(bool), np.concatenate([p[3] for p in pieces]).astype(np.uint16))


#: what a process trace's ``process`` section holds besides the profile's own fields (generate.py; ``recording``:
#: where a trace made from a recording came from, and ``threads``/``threads_source``: how many threads the
#: recorded program kept running in its steps, swaptrace.capture.process_trace)
TRACE_PROCESS_KEYS = ("source", "model_footprint_pages", "recording", "threads", "threads_source")


def runtime_of(meta: dict[str, Any], where: str = "trace") -> RuntimeProfile | None:
    """The runtime profile a process trace's metadata states (``process``), checked as a profile file is
    (:func:`profile_from_dict`); None for a model's own trace."""
    process = meta.get("process")
    if not process:
        return None
    if not isinstance(process, dict):
        raise ConfigError(f"{where}: metadata process = {process!r} is not a runtime profile")
    # beside the profile's fields, generate records where the profile came from and the model's own footprint
    fields = {k: v for k, v in process.items() if k not in TRACE_PROCESS_KEYS}
    pages = process.get("model_footprint_pages", 0)
    if isinstance(pages, bool) or not isinstance(pages, int) or pages < 0:
        raise ConfigError(f"{where}: metadata process model_footprint_pages = {pages!r} is not a page count")
    return profile_from_dict(fields, f"{where}: metadata process")


def anon_budget_bytes(memory_bytes: int, profile: RuntimeProfile) -> int:
    """The anonymous memory a whole-process limit leaves the trace: the limit less page cache and kernel memory.

    Parameters
    ----------
    memory_bytes : int
        The whole process's limit, in bytes (``--memory`` on a process trace).
    profile : RuntimeProfile
        The trace's runtime (:func:`runtime_of`).
    """
    overhead = profile.file_bytes + profile.kernel_bytes
    budget = memory_bytes - overhead
    if budget <= 0 or math.isnan(budget):
        raise ConfigError(f"--memory {format_bytes(memory_bytes)} is not above what the process's group holds "
                          f"besides anonymous memory ({format_bytes(overhead)} of page cache and kernel memory, "
                          f"runtime profile {profile.name})")
    return budget
