"""Compare two swap I/O streams (e.g. emulator vs kernel capture).

``compare_streams(a, b)`` treats ``a`` as the reference (usually the kernel
capture) and reports for ``b``:

* relative errors ``(b - a) / a`` on pages read and written and on request
  counts;
* the Kolmogorov-Smirnov distance between the request-size distributions of
  reads and of writes, ``D = max_x |F_a(x) - F_b(x)|`` over request sizes
  (two-sample KS statistic on the empirical CDFs, computed exactly from the
  size histograms);
* reads and writes per training step, for a figure of both over time;
* a verdict: ``match`` when every relative error on pages is within
  ``tolerance`` and both KS distances are within ``ks_tolerance``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from swaptrace.core.traceio import OP_DISCARD, OP_READ, OP_WRITE, OPS, open_trace

DEFAULT_TOLERANCE = 0.15
DEFAULT_KS_TOLERANCE = 0.2


def summarize_requests(op: np.ndarray, length: np.ndarray, page_bytes: int = 4096) -> dict[str, Any]:
    """The request part of the swapio summary (contracts.md) from op codes and lengths."""
    op = np.asarray(op)
    length = np.asarray(length, dtype=np.int64)
    bytes_read = int(length[op == OP_READ].sum())
    bytes_written = int(length[op == OP_WRITE].sum())
    hist: dict[str, dict[str, int]] = {}
    for code, name in ((OP_READ, "read"), (OP_WRITE, "write")):
        sizes, counts = np.unique(length[op == code], return_counts=True)
        hist[name] = {str(int(s)): int(c) for s, c in zip(sizes, counts, strict=True)}
    return {
        "pages_in": bytes_read // page_bytes,
        "pages_out": bytes_written // page_bytes,
        "bytes_read": bytes_read,
        "bytes_written": bytes_written,
        "requests": {name: int(np.count_nonzero(op == code)) for code, name in enumerate(OPS)},
        "request_size_hist": hist,
    }


def _merge_hist(into: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


@dataclass(frozen=True)
class StreamProfile:
    """What :func:`compare_streams` needs from one stream."""

    path: str
    source: str
    summary: dict[str, Any]
    first_step: int
    reads_per_step: np.ndarray
    writes_per_step: np.ndarray
    pages_in_per_step: np.ndarray
    pages_out_per_step: np.ndarray
    #: faults per step from the producer's metadata (a capture's getrusage deltas, the emulator's counters),
    #: aligned with ``reads_per_step``; None when the file does not have them
    major_faults_per_step: np.ndarray | None = None
    minor_faults_per_step: np.ndarray | None = None


def _step_faults(meta: dict[str, Any], first: int, n_steps: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Major and minor faults per step from a swapio file's metadata, on the steps ``first ..``."""
    k = meta.get("kernel") or {}
    if k.get("step_major_faults") is not None and k.get("step_minor_faults") is not None:
        start, major, minor = int(meta.get("first_step", first)), k["step_major_faults"], k["step_minor_faults"]
    elif meta.get("step_faults"):
        sf = meta["step_faults"]
        start, major, minor = int(sf.get("first_step", first)), sf["major"], sf["minor"]
    else:
        return None, None
    out = []
    for values in (major, minor):
        v = np.zeros(max(n_steps, start - first + len(values)), dtype=np.int64)
        v[start - first : start - first + len(values)] = values
        out.append(v)
    return out[0], out[1]


def stream_profile(path: str | os.PathLike, batch_rows: int = 1 << 20) -> StreamProfile:
    """Summary plus per-step request counts of a swapio file, read in chunks."""
    tf = open_trace(path, kind="swapio")
    page_bytes = tf.page_bytes
    totals = {"pages_in": 0, "pages_out": 0, "bytes_read": 0, "bytes_written": 0}
    requests = {name: 0 for name in OPS}
    hist: dict[str, dict[str, int]] = {"read": {}, "write": {}}
    per_step: dict[str, np.ndarray] = {k: np.zeros(0, dtype=np.int64) for k in ("r", "w", "pi", "po")}
    step_min = None
    parts = []
    for batch in tf.iter_batches(["step", "op", "length"], batch_rows=batch_rows):
        s = summarize_requests(batch["op"], batch["length"], page_bytes)
        for k in ("bytes_read", "bytes_written"):
            totals[k] += s[k]
        for k, v in s["requests"].items():
            requests[k] += v
        for k in hist:
            _merge_hist(hist[k], s["request_size_hist"][k])
        parts.append((batch["step"].astype(np.int64), batch["op"], batch["length"].astype(np.int64)))
        if len(batch["step"]):
            m = int(batch["step"].min())
            step_min = m if step_min is None else min(step_min, m)
    first = int(tf.meta.get("first_step", step_min if step_min is not None else 0))
    if step_min is not None:
        first = min(first, step_min)
    for steps, ops, lengths in parts:
        idx = steps - first
        n = int(idx.max()) + 1 if len(idx) else 0
        for key, mask, weight in (("r", ops == OP_READ, None), ("w", ops == OP_WRITE, None),
                                  ("pi", ops == OP_READ, lengths // page_bytes),
                                  ("po", ops == OP_WRITE, lengths // page_bytes)):
            counts = np.bincount(idx[mask], weights=None if weight is None else weight[mask], minlength=n)
            counts = counts.astype(np.int64)
            cur = per_step[key]
            if len(counts) > len(cur):
                cur = np.concatenate([cur, np.zeros(len(counts) - len(cur), dtype=np.int64)])
            cur[: len(counts)] += counts
            per_step[key] = cur
    totals["pages_in"] = totals["bytes_read"] // page_bytes
    totals["pages_out"] = totals["bytes_written"] // page_bytes
    summary: dict[str, Any] = dict(tf.meta.get("summary") or {})
    summary.update(totals)
    summary["requests"] = requests
    summary["request_size_hist"] = hist
    n_steps = max((len(v) for v in per_step.values()), default=0)
    steps_meta = tf.meta.get("steps")
    if isinstance(steps_meta, int) and steps_meta > n_steps:
        n_steps = steps_meta

    def padded(key: str) -> np.ndarray:
        v = per_step[key]
        return np.concatenate([v, np.zeros(n_steps - len(v), dtype=np.int64)])

    major, minor = _step_faults(tf.meta, first, n_steps)

    return StreamProfile(
        path=str(path),
        source=str(tf.meta.get("source", "unknown")),
        summary=summary,
        first_step=first,
        reads_per_step=padded("r"),
        writes_per_step=padded("w"),
        pages_in_per_step=padded("pi"),
        pages_out_per_step=padded("po"),
        major_faults_per_step=major,
        minor_faults_per_step=minor,
    )


def stream_summary(path: str | os.PathLike) -> dict[str, Any]:
    """The swapio summary (contracts.md) computed from the rows of any swapio file.

    Request counts, pages, bytes and the size histogram come from the rows;
    fields only the producer can know (``accesses``, ``faults``,
    ``readahead_*``) are copied from the file's own summary when present.
    """
    return stream_profile(path).summary


def _hist_arrays(hist: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    if not hist:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    items = sorted((int(k), int(v)) for k, v in hist.items())
    return np.array([k for k, _ in items]), np.array([v for _, v in items])


def ks_distance(hist_a: dict[str, int], hist_b: dict[str, int]) -> float:
    """Two-sample KS statistic between two size histograms ``{size: count}``.

    ``max |F_a - F_b|`` evaluated at every size present in either; 0 when both
    are empty, 1 when exactly one is empty.
    """
    sa, ca = _hist_arrays(hist_a)
    sb, cb = _hist_arrays(hist_b)
    na, nb = ca.sum(), cb.sum()
    if na == 0 and nb == 0:
        return 0.0
    if na == 0 or nb == 0:
        return 1.0
    grid = np.union1d(sa, sb)
    fa = np.cumsum(np.bincount(np.searchsorted(grid, sa), weights=ca, minlength=len(grid))) / na
    fb = np.cumsum(np.bincount(np.searchsorted(grid, sb), weights=cb, minlength=len(grid))) / nb
    return float(np.max(np.abs(fa - fb)))


def relative_error(reference: float, value: float) -> float:
    """``(value - reference) / reference``; 0 when both are 0, inf when only the reference is."""
    if reference == 0:
        return 0.0 if value == 0 else float("inf")
    return (value - reference) / reference


@dataclass(frozen=True)
class StreamComparison:
    """Result of :func:`compare_streams`; ``a`` is the reference."""

    a: StreamProfile
    b: StreamProfile
    rel_error: dict[str, float]
    ks: dict[str, float]
    tolerance: float
    ks_tolerance: float
    verdict: str
    ok: bool
    rows: list[tuple[str, float, float, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.path, "b": self.b.path,
            "source_a": self.a.source, "source_b": self.b.source,
            "rel_error": self.rel_error, "ks": self.ks,
            "tolerance": self.tolerance, "ks_tolerance": self.ks_tolerance,
            "verdict": self.verdict, "ok": self.ok,
            "table": [{"quantity": q, "a": va, "b": vb, "rel_error": e} for q, va, vb, e in self.rows],
            "request_size_hist": {"a": self.a.summary["request_size_hist"], "b": self.b.summary["request_size_hist"]},
            "faults_per_step": self.faults_per_step(),
        }

    def faults_per_step(self) -> dict[str, Any] | None:
        """Major and minor faults per step of both streams (steps from ``a``'s first), or None without them."""
        fa, fb = (self.a.major_faults_per_step, self.a.minor_faults_per_step), (self.b.major_faults_per_step,
                                                                               self.b.minor_faults_per_step)
        if fa[0] is None or fb[0] is None:
            return None
        shift = self.b.first_step - self.a.first_step
        n = max(len(fa[0]), len(fb[0]) + shift)

        def aligned(v: np.ndarray, offset: int) -> np.ndarray:
            out = np.zeros(n, dtype=np.int64)
            out[offset : offset + len(v)] = v
            return out

        return {"first_step": self.a.first_step,
                "major": {"a": aligned(fa[0], 0).tolist(), "b": aligned(fb[0], shift).tolist()},
                "minor": {"a": aligned(fa[1], 0).tolist(), "b": aligned(fb[1], shift).tolist()}}


def compare_streams(
    a: str | os.PathLike | StreamProfile,
    b: str | os.PathLike | StreamProfile,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    ks_tolerance: float = DEFAULT_KS_TOLERANCE,
) -> StreamComparison:
    """Compare stream ``b`` against the reference stream ``a``.

    Parameters
    ----------
    a, b : path or StreamProfile
        swapio files (any source).
    tolerance : float
        Largest accepted ``|relative error|`` on pages read and pages written.
    ks_tolerance : float
        Largest accepted KS distance of read and of write request sizes.
    """
    pa_ = a if isinstance(a, StreamProfile) else stream_profile(a)
    pb_ = b if isinstance(b, StreamProfile) else stream_profile(b)
    sa, sb = pa_.summary, pb_.summary
    rows = []
    quantities = [
        ("pages_in", sa["pages_in"], sb["pages_in"]),
        ("pages_out", sa["pages_out"], sb["pages_out"]),
        ("read_requests", sa["requests"]["read"], sb["requests"]["read"]),
        ("write_requests", sa["requests"]["write"], sb["requests"]["write"]),
        ("discard_requests", sa["requests"]["discard"], sb["requests"]["discard"]),
    ]
    if pa_.major_faults_per_step is not None and pb_.major_faults_per_step is not None:
        quantities += [("major_faults", int(pa_.major_faults_per_step.sum()), int(pb_.major_faults_per_step.sum())),
                       ("minor_faults", int(pa_.minor_faults_per_step.sum()), int(pb_.minor_faults_per_step.sum()))]
    for name, hist_name in (("mean_read_kib", "read"), ("mean_write_kib", "write")):
        means = []
        for s in (sa, sb):
            sizes, counts = _hist_arrays(s["request_size_hist"][hist_name])
            means.append(float((sizes * counts).sum() / counts.sum() / 1024) if counts.sum() else 0.0)
        quantities.append((name, means[0], means[1]))
    rel = {}
    for name, va, vb in quantities:
        e = relative_error(float(va), float(vb))
        rel[name] = e
        rows.append((name, float(va), float(vb), e))
    ks = {
        "read": ks_distance(sa["request_size_hist"]["read"], sb["request_size_hist"]["read"]),
        "write": ks_distance(sa["request_size_hist"]["write"], sb["request_size_hist"]["write"]),
    }
    failures = [f"{k} {rel[k]:+.1%}" for k in ("pages_in", "pages_out") if abs(rel[k]) > tolerance]
    failures += [f"KS({k}) {v:.3f}" for k, v in ks.items() if v > ks_tolerance]
    ok = not failures
    if ok:
        verdict = (f"match: pages in {rel['pages_in']:+.1%}, pages out {rel['pages_out']:+.1%} "
                   f"(within ±{tolerance:.0%}); KS read {ks['read']:.3f}, write {ks['write']:.3f} (≤ {ks_tolerance})")
    else:
        verdict = f"differ: {', '.join(failures)} (tolerance ±{tolerance:.0%}, KS ≤ {ks_tolerance})"
    return StreamComparison(pa_, pb_, rel, ks, tolerance, ks_tolerance, verdict, ok, rows)


def render_comparison(c: StreamComparison) -> str:
    """A plain-text table of the comparison, ending with the verdict line."""
    width = max(len(r[0]) for r in c.rows)
    lines = [f"A: {c.a.path} ({c.a.source})", f"B: {c.b.path} ({c.b.source})", "",
             f"{'quantity':<{width}}  {'A':>14}  {'B':>14}  {'(B-A)/A':>9}"]
    for name, va, vb, e in c.rows:
        fmt = (lambda v: f"{v:14.2f}") if name.startswith("mean") else (lambda v: f"{v:14.0f}")
        lines.append(f"{name:<{width}}  {fmt(va)}  {fmt(vb)}  {e:+9.1%}")
    lines.append("")
    lines.append("request sizes (KiB: A count / B count)")
    for op in ("read", "write"):
        ha = c.a.summary["request_size_hist"][op]
        hb = c.b.summary["request_size_hist"][op]
        sizes = sorted({int(k) for k in ha} | {int(k) for k in hb})
        shown = sizes[:12]
        cells = ", ".join(f"{s // 1024}: {ha.get(str(s), 0)}/{hb.get(str(s), 0)}" for s in shown)
        more = f", ... ({len(sizes) - len(shown)} more sizes)" if len(sizes) > len(shown) else ""
        lines.append(f"  {op:<5} KS {c.ks[op]:.3f}  {cells}{more}")
    steps = c.faults_per_step()
    if steps is not None:
        lines.append("")
        lines.append("faults per step (A / B): the steps where they differ most")
        for kind in ("major", "minor"):
            a, b = np.asarray(steps[kind]["a"]), np.asarray(steps[kind]["b"])
            worst = np.argsort(-np.abs(b - a), kind="stable")[:3]
            cells = ", ".join(f"step {steps['first_step'] + int(i)}: {a[i]}/{b[i]}" for i in sorted(worst) if a[i] != b[i])
            lines.append(f"  {kind:<5} {cells or 'equal in every step'}")
    lines.append("")
    lines.append(c.verdict)
    return "\n".join(lines)


__all__ = [
    "DEFAULT_KS_TOLERANCE", "DEFAULT_TOLERANCE", "OP_DISCARD", "StreamComparison", "StreamProfile",
    "compare_streams", "ks_distance", "relative_error", "render_comparison", "stream_profile", "stream_summary",
    "summarize_requests",
]
