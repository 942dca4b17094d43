"""Reclaim agents running machine-wide, which can take memory from a captured program besides its own limit.

A capture's limit is the only pressure it means to apply, but a system may reclaim on its own:

* **DAMON** (mm/damon/): a ``kdamond`` kernel thread monitors accesses and applies *schemes*, e.g.
  ``pageout`` of regions idle for a while. Configured through sysfs
  (``/sys/kernel/mm/damon/admin/kdamonds/N/``: ``state``, ``contexts/*/operations``,
  ``schemes/*/action``, ``access_pattern/age/min`` in aggregation intervals,
  ``monitoring_attrs/intervals/aggr_us``, filters ``ops_filters``/``filters``/``core_filters``),
  or by the ``damon_reclaim`` and ``damon_lru_sort`` modules (``/sys/module/*/parameters/enabled``).
  Documentation/admin-guide/mm/damon/usage.rst, reclaim.rst.
* **MGLRU's** ``min_ttl_ms`` (``/sys/kernel/mm/lru_gen/min_ttl_ms``): keeps the working set of the
  last N ms and evicts older pages proactively under pressure.
* **user-space proactive reclaim** (senpai, oomd, systemd-oomd, tmo), found by their process names;
  they write ``memory.reclaim`` or lower limits of groups they manage.

A DAMON ``pageout`` scheme for unmapped page cache, as on the development machine, drops the file
pages a program read some time after it stopped using them; a limited run that starts after that
reads them again and the reads (and the cache) are charged to its group. The capture reports what it
found and how much page cache the limited group held (:mod:`swaptrace.capture.command`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: process names of user-space proactive reclaimers
PROACTIVE_AGENTS = ("senpai", "oomd", "systemd-oomd", "tmo", "memtierd")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _filters(scheme: Path) -> list[str]:
    """A scheme's filters as ``"allow anon"``/``"reject anon"`` words (``matching N`` negates the type)."""
    out = []
    for kind in ("ops_filters", "filters", "core_filters"):
        for f in sorted((scheme / kind).glob("[0-9]*"), key=lambda p: int(p.name)):
            ftype = _read(f / "type") or "?"
            matching = (_read(f / "matching") or "Y").upper().startswith("Y")
            allow = (_read(f / "allow") or "N").upper().startswith("Y")
            out.append(f"{'allow' if allow else 'reject'} {'' if matching else 'non-'}{ftype}")
    return out


def _scheme(scheme: Path, aggr_us: int | None) -> dict[str, Any]:
    age_min = _int(scheme / "access_pattern" / "age" / "min")
    return {
        "action": _read(scheme / "action"),
        "min_age_aggregations": age_min,
        "min_age_s": None if age_min is None or aggr_us is None else age_min * aggr_us / 1e6,
        "max_accesses": _int(scheme / "access_pattern" / "nr_accesses" / "max"),
        "quota_bytes_per_reset": _int(scheme / "quotas" / "bytes"),
        "filters": _filters(scheme),
        "applied_bytes": _int(scheme / "stats" / "sz_applied"),
    }


def _kdamond(path: Path) -> dict[str, Any]:
    contexts = []
    for ctx in sorted((path / "contexts").glob("[0-9]*"), key=lambda p: int(p.name)):
        aggr_us = _int(ctx / "monitoring_attrs" / "intervals" / "aggr_us")
        schemes = [_scheme(s, aggr_us) for s in sorted((ctx / "schemes").glob("[0-9]*"), key=lambda p: int(p.name))]
        contexts.append({"operations": _read(ctx / "operations"), "aggr_us": aggr_us, "schemes": schemes})
    return {"id": path.name, "state": _read(path / "state"), "pid": _int(path / "pid"), "contexts": contexts}


def _threads(proc: Path, names: tuple[str, ...], prefix: str | None = None) -> list[dict[str, Any]]:
    found = []
    for entry in proc.glob("[0-9]*"):
        comm = _read(entry / "comm")
        if comm and (comm in names or (prefix is not None and comm.startswith(prefix))):
            found.append({"pid": int(entry.name), "comm": comm})
    return sorted(found, key=lambda d: d["pid"])


def detect_reclaim_agents(root: Path = Path("/")) -> dict[str, Any]:
    """What reclaims memory machine-wide besides a cgroup's own limit (read-only; ``root`` for tests).

    Returns
    -------
    dict
        ``damon``: the sysfs ``kdamonds`` (state, operations, schemes with action, minimum age in
        seconds and filters), the ``damon_reclaim``/``damon_lru_sort`` module switches and the
        ``kdamond`` threads; ``mglru_min_ttl_ms``; ``proactive``: user-space reclaimers by name;
        ``active``: one line for each agent that can take pages away during a capture.
    """
    root = Path(root)
    sysfs = root / "sys"
    kdamonds = [_kdamond(p) for p in sorted((sysfs / "kernel/mm/damon/admin/kdamonds").glob("[0-9]*"),
                                           key=lambda p: int(p.name))]
    modules = {m: _read(sysfs / "module" / m / "parameters" / "enabled") for m in ("damon_reclaim", "damon_lru_sort")}
    threads = _threads(root / "proc", (), prefix="kdamond")
    min_ttl = _int(sysfs / "kernel/mm/lru_gen/min_ttl_ms")
    proactive = _threads(root / "proc", PROACTIVE_AGENTS)
    active = []
    for k in kdamonds:
        if k["state"] != "on":
            continue
        for ctx in k["contexts"]:
            for s in ctx["schemes"]:
                if s["action"] in ("pageout", "lru_deprio", "cold"):
                    age = "" if s["min_age_s"] is None else f" idle >= {s['min_age_s']:g} s"
                    filt = f" ({', '.join(s['filters'])})" if s["filters"] else ""
                    active.append(f"DAMON kdamond {k['id']} ({ctx['operations']}): {s['action']} of regions{age}{filt}")
    for name, state in modules.items():
        if state is not None and state.upper().startswith("Y"):
            active.append(f"DAMON module {name} enabled")
    if threads and not active:
        active.append(f"{len(threads)} kdamond thread(s) running ({', '.join(t['comm'] for t in threads)})")
    if min_ttl:
        active.append(f"MGLRU min_ttl_ms = {min_ttl}")
    active += [f"user-space proactive reclaim: {p['comm']} (pid {p['pid']})" for p in proactive]
    return {"damon": {"kdamonds": kdamonds, "modules": modules, "threads": threads},
            "mglru_min_ttl_ms": min_ttl, "proactive": proactive, "active": active}
