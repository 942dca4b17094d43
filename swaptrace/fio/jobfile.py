"""Reading and checking fio job files: the parser and the value checks ``fio --parse-only`` misses.

:func:`parse_job_file` reads the INI-like job format (fio's HOWTO, "Job file
format": ``[section]`` headers, ``option=value`` lines, ``#``/``;``
comments) with ``${VAR}`` expanded from the environment the run will give
fio. :func:`validate_job_file` checks option values fio 3.33 accepts but
silently mis-handles (percentages that do not sum to 100, unaligned sizes,
v3 iologs, a replay without ``replay_redirect`` ...). Used by
:mod:`swaptrace.fio.jobs` on the folder it writes and by
:mod:`swaptrace.fio.runner` before each run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from swaptrace.core.inputs import read_text
from swaptrace.core.units import parse_bytes
from swaptrace.errors import ConfigError
from swaptrace.fio import iolog
from swaptrace.fio.choices import IOENGINES  # noqa: F401  (re-exported)

_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: fio's block-I/O engines the generated jobs make sense with (fio HOWTO, "I/O engine"); the others
#: (net, cpuio, rados, http, ...) do not read or write a file or device the way a swap replay needs
_RW = {"read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite"}


def parse_job_file(path: str | os.PathLike, env: dict[str, str]) -> dict[str, dict[str, str]]:
    """Sections of a fio job file as ``{section: {option: value}}``, ``${VAR}`` expanded from ``env``."""
    sections: dict[str, dict[str, str]] = {}
    current = None
    for lineno, raw in enumerate(read_text(path, "fio job file").splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is None:
            raise ConfigError(f"{path}:{lineno}: option outside a section")
        key, _, value = line.partition("=")

        def expand(m: re.Match, lineno=lineno) -> str:
            if m.group(1) not in env:
                raise ConfigError(f"{path}:{lineno}: ${{{m.group(1)}}} is not set")
            return env[m.group(1)]

        current[key.strip()] = _ENV_RE.sub(expand, value.strip())
    return sections


def _percent_list(text: str, what: str, problems: list[str]) -> list[tuple[str, int]]:
    pairs = []
    for item in text.split(":"):
        left, sep, right = item.partition("/")
        if not sep:
            problems.append(f"{what}: entry {item!r} lacks '/'")
            continue
        try:
            pairs.append((left, int(right)))
        except ValueError:
            problems.append(f"{what}: percentage {right!r} is not an integer (fio truncates fractions)")
    if pairs and sum(p for _, p in pairs) != 100:
        problems.append(f"{what}: percentages add up to {sum(p for _, p in pairs)}, not 100")
    return pairs


def validate_job_file(path: str | os.PathLike, env: dict[str, str]) -> None:
    """Check option *values* that ``fio --parse-only`` lets through (docs/fio.md, "fio 3.33 pitfalls handled").

    Checks: ``rw`` names, request sizes (positive, multiples of 512, at most
    the job's size), ``bssplit`` percentages (integers summing to 100 per
    direction, with ``norandommap=1``), ``rwmixread`` and
    ``percentage_random`` in 0..100, ``zoned`` access/size percentages,
    positive ``runtime`` and ``size``, ``replay_redirect`` on every replay,
    and that the iolog is v2 with aligned requests inside the target.

    Raises
    ------
    ConfigError
        Listing every problem found, prefixed with the file name.
    """
    problems: list[str] = []
    sections = parse_job_file(path, env)
    if not sections:
        problems.append("no job section")
    for name, opts in sections.items():
        size = None
        if "size" in opts:
            try:
                size = parse_bytes(opts["size"], "size")
                if size <= 0:
                    problems.append(f"[{name}] size must be positive")
            except ConfigError as exc:
                problems.append(f"[{name}] {exc}")
        if opts.get("ioengine", "psync") not in IOENGINES:
            problems.append(f"[{name}] ioengine={opts['ioengine']!r} is not one of {', '.join(IOENGINES)}")
        rw = opts.get("rw", "read")
        if rw not in _RW:
            problems.append(f"[{name}] rw={rw!r} is not a fio direction")
        if "bs" in opts:
            _check_size(opts["bs"], size, f"[{name}] bs", problems)
        if "bssplit" in opts:
            if opts.get("norandommap") != "1":
                problems.append(f"[{name}] bssplit without norandommap=1 truncates sizes")
            for part in opts["bssplit"].split(","):
                for label, _ in _percent_list(part, f"[{name}] bssplit", problems):
                    _check_size(label, size, f"[{name}] bssplit size", problems)
        for key in ("rwmixread", "percentage_random"):
            if key in opts:
                for v in opts[key].split(","):
                    if not v.isdigit() or not 0 <= int(v) <= 100:
                        problems.append(f"[{name}] {key}={opts[key]!r}: each value must be an integer 0..100")
        dist = opts.get("random_distribution")
        if dist and dist.startswith("zoned:"):
            _check_zoned(dist[len("zoned:"):], f"[{name}] zoned", problems)
        if "runtime" in opts and (not opts["runtime"].isdigit() or int(opts["runtime"]) <= 0):
            problems.append(f"[{name}] runtime={opts['runtime']!r} must be a positive number of seconds")
        if "read_iolog" in opts:
            if not opts.get("replay_redirect"):
                problems.append(f"[{name}] replay without replay_redirect would write to the file named in the log")
            _check_iolog(opts, name, env, problems)
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems))


def _check_zoned(text: str, what: str, problems: list[str]) -> None:
    """``access%/size%`` pairs: integers, each column summing to 100 (fio truncates fractions)."""
    access, size = [], []
    for item in text.split(":"):
        a, sep, b = item.partition("/")
        if not sep or not a.isdigit() or not b.isdigit():
            problems.append(f"{what}: entry {item!r} is not integer access%/size%")
            return
        access.append(int(a))
        size.append(int(b))
    for label, col in (("access", access), ("size", size)):
        if sum(col) != 100:
            problems.append(f"{what}: {label} percentages add up to {sum(col)}, not 100")


def _check_size(label: str, size: int | None, what: str, problems: list[str]) -> None:
    try:
        n = parse_bytes(label, what)
    except ConfigError as exc:
        problems.append(str(exc))
        return
    if n <= 0 or n % 512:
        problems.append(f"{what} {label!r} is not a positive multiple of 512 bytes")
    elif size is not None and n > size:
        problems.append(f"{what} {label!r} exceeds size {size}")


def _check_iolog(opts: dict[str, str], name: str, env: dict[str, str], problems: list[str]) -> None:
    log = Path(opts["read_iolog"])
    if not log.exists():
        problems.append(f"[{name}] read_iolog {log} does not exist")
        return
    target_bytes = int(env.get("SWAPTRACE_SIZE", "0") or 0)
    align = int(opts.get("replay_align", "1"))
    if align & (align - 1):
        problems.append(f"[{name}] replay_align={align} is not a power of two")
        return
    with open(log, encoding="ascii") as fh:
        if fh.readline().strip() != iolog.IOLOG_V2_HEADER:
            problems.append(f"[{name}] {log.name} is not a v2 iolog (v3 pacing is unreliable in fio 3.33)")
            return
        for lineno, line in enumerate(fh, start=2):
            parts = line.split()
            if len(parts) != 4 or parts[1] not in ("read", "write"):
                continue
            off, ln = int(parts[2]), int(parts[3])
            if off % align or ln % align:
                problems.append(f"[{name}] {log.name}:{lineno} request not aligned to {align}")
                return
            if target_bytes and off + ln > target_bytes:
                problems.append(
                    f"[{name}] {log.name}:{lineno} request ends at {off + ln}, past the target's {target_bytes} bytes"
                )
                return
