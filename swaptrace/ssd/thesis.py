"""The thesis's three SSD effects, reproduced in the model (README.md, "The thesis reproduced").

1. **Request size** -- 128 KiB requests gave 1.75x the bandwidth of the
   swap pattern's small (4-32 KiB) requests. Here: random reads of the swap
   size mix vs random 128 KiB reads at the same queue depth, on a full drive.
2. **Sequential vs random writes** -- sequential writes gave 4.37x the write
   bandwidth of the swap pattern. Here: 128 KiB sequential writes on a
   sequentially preconditioned drive vs steady-state random writes of the swap
   size mix.
3. **Bandwidth falls with written volume** -- here: the swap-like mix
   (random 4-32 KiB, half reads) on a fresh drive, bandwidth of the first
   window vs the last five windows after ``2 * drive_writes`` drive writes.

:func:`run_thesis` returns the JSON that ``fio compare --model`` reads, with
top-level float keys ``request_size_gain``, ``sequential_write_gain`` and
``bandwidth_decline`` (contracts.md), plus the inputs.

The default device is ``nvme-tlc`` shrunk to 4 GiB with 1 MiB blocks (32
pages of 32 KiB) so the whole study runs in well under two minutes; ratios
depend on over-provisioning and queue depth, which are printed with them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from swaptrace.ssd.choices import REAL_BACKGROUND
from swaptrace.ssd.config import SSDConfig, load_device, spare_from_op
from swaptrace.ssd.run import request_size_sweep, synth
from swaptrace.ssd.steady import Background

THESIS = {"request_size_gain": 1.75, "sequential_write_gain": 4.37}

#: the thesis study's default device (a scaled-down 970-class drive)
DEFAULT_DEVICE = "nvme-tlc"
DEFAULT_OVERRIDES = {"pages_per_block": 32}
DEFAULT_CAPACITY = 4 << 30


def default_config() -> SSDConfig:
    """``nvme-tlc`` with 1 MiB blocks at 4 GiB user capacity."""
    return load_device(DEFAULT_DEVICE, DEFAULT_OVERRIDES, capacity_bytes=DEFAULT_CAPACITY)


def _request_size_experiment(cfg: SSDConfig, iodepth: int, seed: int, say) -> tuple[float, float]:
    """1. Random reads on a full drive: the swap size mix vs 128 KiB; (swap-mix, 128 KiB) bandwidth in MB/s."""
    read_volume = min(cfg.user_bytes, 512 << 20)
    small = synth(cfg, "swap", rwmix_read=100.0, volume_bytes=read_volume, iodepth=iodepth, precondition="seq",
                  seed=seed)
    large = synth(cfg, "randread", bs_bytes=128 << 10, volume_bytes=read_volume, iodepth=iodepth,
                  precondition="seq", seed=seed)
    small_bw, large_bw = small.summary["throughput_mb_s"], large.summary["throughput_mb_s"]
    say(f"request size: swap-mix reads {small_bw:.0f} MB/s, 128 KiB reads {large_bw:.0f} MB/s (QD {iodepth})")
    return small_bw, large_bw


def _write_experiment(cfg: SSDConfig, write_iodepth: int, drive_writes: float, seed: int,
                      say) -> tuple[float, float, float]:
    """2. Sequential 128 KiB vs steady-state random swap-pattern writes; (MB/s, MB/s, random WAF)."""
    cap = cfg.user_bytes
    seq = synth(cfg, "write", bs_bytes=128 << 10, volume_bytes=cap, iodepth=write_iodepth, precondition="seq",
                seed=seed)
    rnd = synth(cfg, "swap", rwmix_read=0.0, volume_bytes=int(drive_writes * cap), iodepth=write_iodepth,
                precondition="seq", seed=seed)
    seq_bw = seq.summary["write_mb_s"]
    rnd_bw = rnd.summary["steady_state"]["bandwidth_mb_s"]
    say(f"writes: sequential {seq_bw:.0f} MB/s, swap-pattern random {rnd_bw:.0f} MB/s (steady, WAF "
        f"{rnd.timeline['waf'][-5:].mean():.2f})")
    return seq_bw, rnd_bw, float(rnd.timeline["waf"][-5:].mean())


def _fresh_drive_experiment(cfg: SSDConfig, write_iodepth: int, drive_writes: float, seed: int, say):
    """3. Bandwidth against written volume on a fresh drive, swap-like mix (half reads).

    Twice the drive writes of experiment 2: on a fresh drive the not-yet-written
    space (exp(-k) of it after k drive writes) acts as extra spare, so WAF keeps
    rising for longer. Returns the run, its first window's and its steady bandwidth (MB/s).
    """
    cap = cfg.user_bytes
    fresh = synth(cfg, "swap", rwmix_read=50.0, volume_bytes=int(4 * drive_writes * cap), iodepth=write_iodepth,
                  precondition="none", seed=seed)
    fresh_bw = float(fresh.timeline["bandwidth_mb_s"][0])
    steady_bw = float(fresh.summary["steady_state"]["bandwidth_mb_s"])
    say(f"fresh drive, swap-like mix: {fresh_bw:.0f} MB/s at first, {steady_bw:.0f} MB/s after "
        f"{fresh.summary['host_write_bytes'] / cap:.1f} drive writes")
    return fresh, fresh_bw, steady_bw


def run_thesis(config: SSDConfig | None = None, *, iodepth: int = 8, write_iodepth: int = 32,
               drive_writes: float = 3.0, seed: int = 0, real_drive: bool = False,
               real_config: SSDConfig | None = None, real_swap_bytes: int | None = None,
               log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the three experiments; return the ratios, their parts and the inputs.

    Parameters
    ----------
    config : SSDConfig, optional
        Device (default :func:`default_config`).
    iodepth : int
        Queue depth of the read (request-size) experiment.
    write_iodepth : int
        Queue depth of the write experiments.
    drive_writes : float
        Random-write volume, in user capacities, for steady state.
    seed : int
        Random seed.
    real_drive : bool
        Also run :func:`thesis_real` (the full ``nvme-tlc`` in the steady state of
        :data:`REAL_BACKGROUND`, about 20 s) and store it under ``real_drive``.
    real_config, real_swap_bytes : optional
        That drive (default the full ``nvme-tlc``) and its swap partition (default :data:`REAL_SWAP_BYTES`).
    log : callable, optional
        Receives one line per finished experiment.
    """
    default_device = config is None
    cfg = config or default_config()
    say = log or (lambda _msg: None)
    cap = cfg.user_bytes
    t0 = time.perf_counter()

    small_bw, large_bw = _request_size_experiment(cfg, iodepth, seed, say)
    seq_bw, rnd_bw, rnd_waf = _write_experiment(cfg, write_iodepth, drive_writes, seed, say)
    fresh, fresh_bw, steady_bw = _fresh_drive_experiment(cfg, write_iodepth, drive_writes, seed, say)
    bw = fresh.timeline["bandwidth_mb_s"]
    sweep = request_size_sweep(cfg, iodepths=(1, iodepth, write_iodepth), volume_bytes=min(cap, 64 << 20), seed=seed)

    real = (thesis_real(real_config, swap_bytes=real_swap_bytes or REAL_SWAP_BYTES, seed=seed, log=say)
            if real_drive else None)
    return {
        "request_size_gain": large_bw / small_bw,
        "sequential_write_gain": seq_bw / rnd_bw,
        "bandwidth_decline": steady_bw / fresh_bw,
        **({"real_drive": real} if real is not None else {}),
        "thesis": dict(THESIS),
        "parts": {
            "swap_mix_read_mb_s": small_bw,
            "read_128k_mb_s": large_bw,
            "sequential_write_mb_s": seq_bw,
            "random_write_mb_s": rnd_bw,
            "random_write_waf": rnd_waf,
            "fresh_mb_s": fresh_bw,
            "steady_mb_s": steady_bw,
            "steady": bool(fresh.summary["steady_state"]["steady"]),
        },
        "bandwidth_vs_written": {
            "host_written_bytes": fresh.timeline["host_written_bytes"].tolist(),
            "bandwidth_mb_s": bw.tolist(),
            "waf": fresh.timeline["waf"].tolist(),
        },
        "request_size_sweep": sweep,
        "inputs": {
            "device": cfg.describe(),
            "default_device": default_device,
            "iodepth": iodepth,
            "write_iodepth": write_iodepth,
            "drive_writes": drive_writes,
            "seed": seed,
            "swap_size_mix": "4/8/16/32 KiB with p = 0.4/0.25/0.2/0.15",
        },
        "elapsed_s": time.perf_counter() - t0,
    }


def render(result: dict[str, Any]) -> str:
    """Human-readable table of our ratios beside the thesis's."""
    dev = result["inputs"]["device"]
    lines = [
        f"device: {dev['name']} ({dev['user_bytes'] / 2**30:.1f} GiB user, OP {dev['over_provisioning']:.1%}, "
        f"{dev['dies']} dies, {dev['gc_policy']} GC)"
        + (" -- the default, a scaled-down drive so this runs quickly" if result["inputs"].get("default_device") else ""),
        "",
        f"{'effect':<44} {'model':>8} {'thesis':>8}",
        f"{'128 KiB vs swap-mix (4-32 KiB) read bandwidth':<44} {result['request_size_gain']:>7.2f}x "
        f"{THESIS['request_size_gain']:>7.2f}x",
        f"{'sequential vs swap-pattern write bandwidth':<44} {result['sequential_write_gain']:>7.2f}x "
        f"{THESIS['sequential_write_gain']:>7.2f}x",
        f"{'steady / fresh bandwidth (swap-like mix)':<44} {result['bandwidth_decline']:>7.2f}x "
        f"{'falls':>8}",
    ]
    if result.get("real_drive"):
        lines += ["", render_real(result["real_drive"])]
    return "\n".join(lines)


# -- the two ratios on a real drive in steady state --------------------------------------------------------

#: the real-drive study's defaults: the full nvme-tlc, a 16 GiB swap partition, the rest of the drive
#: full and in the steady state of random overwrites (the SNIA-preconditioned state fio tests meet)
REAL_SWAP_BYTES = 16 << 30
#: sensitivity grid: datasheet OPs and fill levels of the rest of the drive
SENSITIVITY_OPS = (0.07, 0.12, 0.28)
SENSITIVITY_FILLS = (0.5, 0.8, 1.0)


def _drive_inputs(cfg: SSDConfig, bg: Background, swap_bytes: int) -> dict[str, Any]:
    """The drive a real-drive run used, as recorded beside its ratios."""
    return {"device": cfg.name, "physical_op": cfg.physical_op, "effective_op": cfg.effective_op,
            "physical_bytes": cfg.physical_bytes, "swap_bytes": swap_bytes, "background": bg.describe()}


def _last_pass(timeline: dict[str, Any], summary: dict[str, Any], windows: int = 16) -> tuple[float, float]:
    """Bandwidth (MB/s) and WAF of the last pass over the partition: its last ``windows`` timeline windows."""
    last = slice(-windows, None)
    written = timeline["window_write_bytes"][last].sum()
    ends = timeline["t_end_us"]
    span = ends[-1] - ends[-windows - 1] if len(ends) > windows else None
    bandwidth = float(written / span) if span else float(summary["write_mb_s"])
    return bandwidth, float(timeline["flash_write_bytes"][last].sum() / written)


def thesis_real(config: SSDConfig | None = None, *, op: float | None = None, background: Background | None = None,
                swap_bytes: int = REAL_SWAP_BYTES, iodepth: int = 8, write_iodepth: int = 32,
                random_drive_writes: float = 1.0, sequential_passes: int = 2, seed: int = 0,
                log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The thesis's two ratios on a real drive that starts in the steady state of its background.

    The drive keeps its real size (default: the full ``nvme-tlc``, 512 GiB raw); the swap area is a
    partition of ``swap_bytes`` at its start; the rest holds ``background`` (sampled steady state,
    :mod:`swaptrace.ssd.steady`). All I/O goes to the swap partition, on one drive, in order:

    1. random reads of the swap size mix (4-32 KiB) and of 128 KiB at QD ``iodepth`` (``request_size_gain``);
    2. random writes of the swap size mix at QD ``write_iodepth``, ``random_drive_writes`` swap
       partitions of them; their bandwidth over the last windows (steady or not, said);
    3. then ``sequential_passes`` passes of 128 KiB sequential writes over the swap partition, bandwidth
       and WAF over the last pass (``sequential_write_gain`` = sequential / random write bandwidth).
       The first pass still pays for the randomly written blocks it overwrites piecemeal; later
       passes free whole blocks.

    Parameters
    ----------
    config : SSDConfig, optional
        The drive (default ``nvme-tlc``); ``op`` replaces its over-provisioning.
    background : Background, optional
        Default :data:`REAL_BACKGROUND`.
    """
    from swaptrace.ssd.run import simulate_chunks
    from swaptrace.ssd.simulate import Simulator
    from swaptrace.ssd.steady import layout
    from swaptrace.ssd.workloads import synthetic_requests

    cfg = config or load_device(DEFAULT_DEVICE)
    if op is not None:
        cfg = load_device(DEFAULT_DEVICE, op=op) if config is None else dataclasses.replace(
            cfg, spare_factor=spare_from_op(op))
    bg = background or Background(**REAL_BACKGROUND)
    say = log or (lambda _msg: None)
    t0 = time.perf_counter()
    swap_units = swap_bytes // cfg.map_bytes
    sim = Simulator(cfg, timing=True, iodepth=iodepth, seed=seed)
    lay = layout(cfg, 0, swap_units, bg)
    start = sim.start_steady(lay, seed=seed)

    def pattern(name, bs, volume, read_pct, s):
        return synthetic_requests(name, user_units=swap_units, map_bytes=cfg.map_bytes, bs_bytes=bs,
                                  volume_bytes=volume, rwmix_read=read_pct, seed=s)

    def run(chunks, qd, window):
        sim.set_iodepth(qd)
        return simulate_chunks(sim, chunks, window_bytes=window)

    read_volume = min(swap_bytes, 512 << 20)
    _, small = run(pattern("swap", 4096, read_volume, 100.0, seed + 1), iodepth, read_volume // 8)
    _, large = run(pattern("randread", 128 << 10, read_volume, 100.0, seed + 2), iodepth, read_volume // 8)
    small_bw, large_bw = small["throughput_mb_s"], large["throughput_mb_s"]
    rnd_volume = int(random_drive_writes * swap_bytes)
    tl, rnd = run(pattern("swap", 4096, rnd_volume, 0.0, seed + 3), write_iodepth, max(rnd_volume // 32, 1 << 20))
    rnd_bw = float(rnd["steady_state"]["bandwidth_mb_s"])
    seq_tl, seq = run(pattern("write", 128 << 10, sequential_passes * swap_bytes, 0.0, seed + 4), write_iodepth,
                      max(swap_bytes // 16, 1 << 20))
    seq_bw, seq_waf = _last_pass(seq_tl, seq)
    out = {
        "request_size_gain": large_bw / small_bw,
        "sequential_write_gain": seq_bw / rnd_bw,
        "thesis": dict(THESIS),
        "parts": {
            "swap_mix_read_mb_s": small_bw, "read_128k_mb_s": large_bw,
            "random_write_mb_s": rnd_bw, "random_write_steady": bool(rnd["steady_state"]["steady"]),
            "random_write_waf_steady": rnd["steady_waf"]["waf"], "random_write_waf_cumulative": rnd["waf"],
            "sequential_write_mb_s": seq_bw, "sequential_write_waf": seq_waf,
        },
        "inputs": {**_drive_inputs(cfg, bg, swap_bytes), "iodepth": iodepth, "write_iodepth": write_iodepth,
                   "random_drive_writes": random_drive_writes, "sequential_passes": sequential_passes,
                   "seed": seed, "steady_state_init_s": start["seconds"]},
        "elapsed_s": time.perf_counter() - t0,
    }
    say(f"real drive {cfg.name} ({cfg.physical_bytes >> 30} GiB raw, OP {cfg.physical_op:.0%}, background fill "
        f"{bg.fill:.0%}, {bg.overwritten:.0%} overwritten): 128 KiB / swap-mix reads {out['request_size_gain']:.2f}x, "
        f"sequential / random writes {out['sequential_write_gain']:.2f}x (random-write WAF "
        f"{rnd['steady_waf']['waf']:.2f}) in {out['elapsed_s']:.0f} s")
    return out


def sensitivity(ops=SENSITIVITY_OPS, fills=SENSITIVITY_FILLS, *, overwritten: float = 1.0,
                log: Callable[[str], None] | None = None, **kwargs) -> dict[str, Any]:
    """:func:`thesis_real` over physical OPs and background fill levels (``overwritten`` of the data random).

    Returns ``{"ops", "fills", "overwritten", "rows": [{op, fill, request_size_gain,
    sequential_write_gain, random_write_waf}], "nearest": the row closest to the thesis's 4.37x}``.
    """
    rows = []
    for op in ops:
        for fill in fills:
            r = thesis_real(op=op, background=Background(fill=fill, overwritten=overwritten, swap_prior="pool"),
                            log=log, **kwargs)
            rows.append({"op": op, "fill": fill, "request_size_gain": r["request_size_gain"],
                         "sequential_write_gain": r["sequential_write_gain"],
                         "random_write_waf": r["parts"]["random_write_waf_steady"]})
    nearest = min(rows, key=lambda r: abs(r["sequential_write_gain"] / THESIS["sequential_write_gain"] - 1))
    return {"ops": list(ops), "fills": list(fills), "overwritten": overwritten, "rows": rows, "nearest": nearest}


def render_real(result: dict[str, Any]) -> str:
    """The real-drive ratios beside the thesis's, and the sensitivity table if present."""
    inp = result["inputs"]
    bg = inp["background"]
    lines = [
        f"real drive: {inp['device']} ({inp['physical_bytes'] >> 30} GiB raw, physical OP {inp['physical_op']:.1%}, "
        f"effective {inp['effective_op']:.1%}), swap partition {inp['swap_bytes'] >> 30} GiB; the rest "
        f"{bg['fill']:.0%} full, {bg['overwritten']:.0%} of it overwritten at random (steady state sampled in "
        f"{inp['steady_state_init_s']:.1f} s)",
        "",
        f"{'ratio':<44} {'model':>8} {'thesis':>8}",
        f"{'128 KiB vs swap-mix (4-32 KiB) reads':<44} {result['request_size_gain']:>7.2f}x "
        f"{THESIS['request_size_gain']:>7.2f}x",
        f"{'sequential vs swap-pattern writes':<44} {result['sequential_write_gain']:>7.2f}x "
        f"{THESIS['sequential_write_gain']:>7.2f}x   (random-write WAF "
        f"{result['parts']['random_write_waf_steady']:.2f})",
    ]
    sens = result.get("sensitivity")
    if sens:
        lines += ["", f"sensitivity (background {sens['overwritten']:.0%} overwritten at random):", "",
                  f"{'OP':>5} {'fill':>5} {'reads 128K/mix':>15} {'seq/random writes':>18} {'random WAF':>11}"]
        for r in sens["rows"]:
            lines.append(f"{r['op']:>5.0%} {r['fill']:>5.0%} {r['request_size_gain']:>14.2f}x "
                         f"{r['sequential_write_gain']:>17.2f}x {r['random_write_waf']:>11.2f}")
        n = sens["nearest"]
        lines += ["", f"closest to the thesis's 4.37x: OP {n['op']:.0%}, fill {n['fill']:.0%} "
                      f"({n['sequential_write_gain']:.2f}x)"]
    return "\n".join(lines)
