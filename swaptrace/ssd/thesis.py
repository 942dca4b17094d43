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

import time
from collections.abc import Callable
from typing import Any

from swaptrace.ssd.config import SSDConfig, load_device
from swaptrace.ssd.run import request_size_sweep, synth

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
               drive_writes: float = 3.0, seed: int = 0,
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

    return {
        "request_size_gain": large_bw / small_bw,
        "sequential_write_gain": seq_bw / rnd_bw,
        "bandwidth_decline": steady_bw / fresh_bw,
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
    return "\n".join(lines)
