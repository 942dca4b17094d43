"""The spreads over seeds behind the SSD tests' tolerances (issue 34: every tolerance derived).

Each section re-runs one stochastic check of ``tests/`` on other seeds and prints, per case, the
model's value, the mean and standard deviation of the simulated value over the seeds, the bias
``mean / model - 1`` and ``|bias| + 3 std`` (relative), which is what the test's tolerance must
cover. The tests quote these numbers beside their tolerances; docs/testing.md lists them.

::

    .venv/bin/python research/tolerances.py thesis            # ~5 s (after ~40 s of JIT compilation)
    .venv/bin/python research/tolerances.py op                # ~1 min
    .venv/bin/python research/tolerances.py oracle            # 2^16 units; add --big for 2^20 (~10 min)
    .venv/bin/python research/tolerances.py steady            # ~2 min
    .venv/bin/python research/tolerances.py timing            # ~1 min
    .venv/bin/python research/tolerances.py all --seeds 8

The seeds of each section are ``--first .. --first + --seeds - 1`` (default 100 .. 107, so none is the
seed its test uses, except where said).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from swaptrace import SSDConfig, load_device, synth
from swaptrace.ssd import analytic as A
from swaptrace.ssd import steady as S
from swaptrace.ssd.config import spare_from_op
from swaptrace.ssd.simulate import Simulator, ftl_waf


def report(name: str, model: float, values: list[float]) -> None:
    """One line: model, mean +- std over the seeds, bias and |bias| + 3 std (relative to the model)."""
    v = np.asarray(values, float)
    mean, std = float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0
    bias = mean / model - 1 if model else mean
    spread = std / model if model else std
    print(f"  {name:<44} model {model:9.4f}  mean {mean:9.4f}  std {std:7.4f}  min {v.min():8.4f}  "
          f"max {v.max():8.4f}  bias {bias:+.4f}  |bias|+3std {abs(bias) + 3 * spread:.4f}  (n={len(v)})",
          flush=True)


def thesis(seeds: list[int]) -> None:
    """tests/test_ssd_thesis_real.py: random-write WAF of a 256 MiB partition on a full 2 GiB drive."""
    from swaptrace.ssd.thesis import thesis_real

    cfg = load_device("nvme-tlc", {"pages_per_block": 32}, capacity_bytes=2 << 30, op=0.07)
    swap = (256 << 20) // cfg.map_bytes
    u, te, np_ = cfg.user_units, cfg.effective_physical_units, cfg.units_per_block
    upper = A.predict_config(cfg)
    # the rest of the drive (u - swap units) fully segregated into full blocks: the partition has all the spare
    lower = A.wa_greedy((te - (u - swap)) / swap, np_)
    print(f"thesis: U {u} units, T_eff {te:.0f}, partition {swap}, Np {np_}: whole drive (upper) {upper:.3f}, "
          f"partition alone with all the spare (lower) {lower:.3f}")
    wafs = []
    for s in seeds:
        r = thesis_real(cfg, background=S.Background(1.0, 1.0, "pool"), swap_bytes=256 << 20,
                        random_drive_writes=2.0, seed=s)
        wafs.append(r["parts"]["random_write_waf_steady"])
    report("random_write_waf_steady vs whole-drive model", upper, wafs)


def op(seeds: list[int]) -> None:
    """tests/test_ssd_op.py: steady WAF of 8 drive writes on a 1 GiB drive vs Desnoyers at the effective spare."""
    print("op: 1 GiB tiny, 4 dies, 64-unit blocks, 8 drive writes of uniform random 4 KiB, steady-state WAF")
    for policy, phys_op, gc_free in [("greedy", 0.07, 0.02), ("greedy", 0.12, 0.05), ("greedy", 0.28, 0.05),
                                     ("fifo", 0.07, 0.02), ("fifo", 0.12, 0.05), ("fifo", 0.40, 0.05)]:
        cfg = load_device("tiny", {"gc_policy": policy, "gc_free_fraction": gc_free, "pages_per_block": 64,
                                   "page_bytes": 4096}, capacity_bytes=1 << 30, op=phys_op)
        wafs = [synth(cfg, "randwrite", bs_bytes=4096, volume_bytes=8 * cfg.user_bytes, timing=False,
                      seed=s).steady_waf for s in seeds]
        report(f"{policy} OP {phys_op:.2f} reserve {gc_free:.2f}", A.predict_config(cfg), wafs)


def _oracle_config(op_: float, ppb: int, policy: str, user_units: int) -> SSDConfig:
    # as tests/test_ssd_oracle.py: one die, reserve of one block, the spare factor of whole blocks
    spare = spare_from_op(op_)
    blocks = math.ceil(user_units / (1.0 - spare) / ppb)
    return SSDConfig(name="oracle", channels=1, dies_per_channel=1, planes=1, blocks_per_plane=blocks,
                     pages_per_block=ppb, page_bytes=4096, spare_factor=spare, gc_policy=policy,
                     gc_free_fraction=0.0, write_buffer_bytes=1 << 20)


def _stream(u: int, total: int, seed: int, r: float | None = None, f: float | None = None, chunk: int = 1 << 21):
    rng = np.random.default_rng(seed)
    hot = int(u * f) if f else 0
    while total > 0:
        n = min(chunk, total)
        if r is None:
            yield rng.integers(0, u, n)
        else:
            yield np.where(rng.random(n) < r, rng.integers(0, hot, n), rng.integers(hot, u, n))
        total -= n


def oracle(seeds: list[int], big: bool) -> None:
    """tests/test_ssd_oracle.py: fill, 4 drive writes of warm-up, WAF over 4 more (one die)."""
    def measure(cfg, r=None, f=None):
        u = cfg.user_units
        return [ftl_waf(cfg, _stream(u, 8 * u, s, r, f), warmup_units=4 * u)[0] for s in seeds]

    def spare(cfg):
        return (cfg.physical_units - cfg.user_units) / cfg.physical_units

    print("oracle: 2^16 units (test_small_device_uniform_is_close_to_greedy_model)")
    cfg = _oracle_config(0.28, 64, "greedy", 1 << 16)
    report("greedy OP 0.28 Np 64, 2^16 units", A.predict_waf("greedy", spare(cfg), 64), measure(cfg))
    if not big:
        return
    print("oracle: 2^20 units (the slow tests)")
    for policy in ("greedy", "fifo"):
        for ppb in (64, 256):
            for o in (0.07, 0.28):
                cfg = _oracle_config(o, ppb, policy, 1 << 20)
                report(f"{policy} OP {o:.2f} Np {ppb}", A.predict_waf(policy, spare(cfg), ppb), measure(cfg))
    for o in (0.07, 0.28):
        cfg = _oracle_config(o, 64, "random", 1 << 20)
        report(f"random OP {o:.2f} Np 64", 1.0 / spare(cfg), measure(cfg))
    cfg = _oracle_config(0.28, 64, "fifo", 1 << 20)
    report("hot/cold 80/20 fifo OP 0.28 (Eq. 14)",
           A.wa_hot_cold(cfg.physical_units / cfg.user_units, 0.8, 0.2), measure(cfg, 0.8, 0.2))


def _closed_valid(sim):
    from swaptrace.kernels.ssd import ftl as K

    st = sim.state
    return np.sort(st.valid[st.bstate == K.CLOSED])


def _ks(a, b, top):
    grid = np.arange(top + 1)
    return float(np.abs(np.searchsorted(a, grid, side="right") / len(a)
                        - np.searchsorted(b, grid, side="right") / len(b)).max())


def _steady_drive(policy, op_=0.12, capacity=256 << 20, pages=64):
    return load_device("tiny", {"gc_policy": policy, "gc_free_fraction": 0.02, "pages_per_block": pages,
                                "page_bytes": 4096}, capacity_bytes=capacity, op=op_)


def _sampled_and_explicit(cfg, lay, s):
    sampled = Simulator(cfg, timing=False, iodepth=1)
    sampled.start_steady(lay, seed=s)
    explicit = Simulator(cfg, timing=False, iodepth=1)
    S.explicit_precondition(explicit, lay, pool_writes=10, seed=s + 1)
    return sampled, explicit


def _waf_of(sim, w):
    before = sim.counters()
    sim.write_units(w)
    return (sim.counters() - before).waf


def steady(seeds: list[int]) -> None:
    """tests/test_ssd_steady.py: the sampled steady state against explicit preconditioning, and from it."""
    print("steady: sampled vs explicit (256 MiB tiny), ratios sampled / explicit; seeds s (sampled), s+1 "
          "(explicit), s+2 (writes)")
    for policy, o, fill, ow in [("greedy", 0.12, 1.0, 1.0), ("greedy", 0.07, 0.7, 0.5), ("fifo", 0.12, 1.0, 1.0),
                                ("fifo", 0.28, 0.9, 1.0)]:
        cfg = _steady_drive(policy, op_=o)
        lay = S.layout(cfg, 0, cfg.user_units // 4, S.Background(fill, ow, "pool"))
        means, kss, w1, w2 = [], [], [], []
        for s in seeds:
            sampled, explicit = _sampled_and_explicit(cfg, lay, 3 * s)
            a, b = _closed_valid(sampled), _closed_valid(explicit)
            means.append(a.mean() / b.mean())
            kss.append(_ks(a, b, cfg.units_per_block))
            rng = np.random.default_rng(3 * s + 2)
            for n, out in ((len(lay.pool) // 2, w1), (2 * len(lay.pool), w2)):
                w = lay.pool[rng.integers(0, len(lay.pool), n)]
                out.append(_waf_of(sampled, w) / _waf_of(explicit, w))
        tag = f"{policy} OP {o:.2f} fill {fill} overwritten {ow}"
        report(f"{tag}: mean valid/block", 1.0, means)
        report(f"{tag}: KS distance", 0.0, kss)
        report(f"{tag}: WAF, first half pool", 1.0, w1)
        report(f"{tag}: WAF, next two pools", 1.0, w2)
    cfg = _steady_drive("fifo", op_=0.07)
    lay = S.layout(cfg, 0, cfg.user_units // 4, S.Background(0.7, 0.5, "pool"))
    ratios = []
    for s in seeds:
        sampled, explicit = _sampled_and_explicit(cfg, lay, 3 * s)
        w = lay.pool[np.random.default_rng(3 * s + 2).integers(0, len(lay.pool), 10 * len(lay.pool))]
        ratios.append(_waf_of(sampled, w) / _waf_of(explicit, w))
    report("fifo OP 0.07 with static data, 10 pools", 1.0, ratios)
    cfg = _steady_drive("greedy", capacity=128 << 20)
    early = []
    for s in seeds:
        res = synth(cfg, "randwrite", bs_bytes=4096, volume_bytes=32 << 20, precondition="steady",
                    region=(4 << 20, 32 << 20), background=S.Background(0.9, 1.0, "pool"), timing=False,
                    window_bytes=4 << 20, seed=s)
        waf = res.timeline["waf"]
        early.append(waf[1:3].mean() / waf[-4:].mean())
    report("replay from steady: windows 2-3 / last 4", 1.0, early)
    cfg = load_device("femu-default")
    vol = cfg.user_bytes
    wafs = [synth(cfg, "randwrite", bs_bytes=4096, volume_bytes=vol, timing=False, precondition="steady",
                  background=S.Background(1.0, 1.0, "pool"), window_bytes=vol // 20, seed=s).steady_waf
            for s in seeds]
    report("femu-default from the sampled start, 1 drive write", A.predict_config(cfg), wafs)


def timing(seeds: list[int]) -> None:
    """tests/test_ssd_timing.py: QD 1 reads, steady random-write bandwidth, a fresh drive's first window."""
    from swaptrace import SSDConfig as C

    def cfg_(**kw):
        base = dict(name="timing", channels=2, dies_per_channel=2, planes=1, blocks_per_plane=320,
                    pages_per_block=64, page_bytes=4096, read_us=20.0, program_us=400.0, erase_us=1000.0,
                    channel_mb_s=800.0, host_mb_s=1000.0, spare_factor=0.2, gc_free_fraction=0.0,
                    write_buffer_bytes=4 << 20)
        base.update(kw)
        return C(**base)

    print("timing: the 2x2-die timing device of tests/test_ssd_timing.py")
    c = cfg_(page_bytes=16384, blocks_per_plane=80, pages_per_block=64)
    one = 4096 / (c.read_us + 4096 / c.channel_mb_s + 4096 / c.host_mb_s)
    bw = [synth(c, "randread", bs_bytes=4096, volume_bytes=64 << 20, iodepth=1, precondition="seq",
                seed=s).throughput_mb_s for s in seeds]
    report("QD1 4 KiB read MB/s vs tR + transfers", one, bw)
    c = cfg_()
    seq = synth(c, "write", bs_bytes=128 << 10, volume_bytes=2 * c.user_bytes, iodepth=32, precondition="seq")
    seq_bw = float(np.mean(seq.timeline["write_mb_s"][-10:]))
    ratios, first = [], []
    for s in seeds:
        rnd = synth(c, "randwrite", bs_bytes=4096, volume_bytes=4 * c.user_bytes, iodepth=32, precondition="seq",
                    seed=s)
        bw_, waf = float(np.mean(rnd.timeline["write_mb_s"][-10:])), float(np.mean(rnd.timeline["waf"][-10:]))
        ratios.append(bw_ / (seq_bw / waf))
        fresh = synth(c, "randwrite", bs_bytes=4096, volume_bytes=3 * c.user_bytes, iodepth=32,
                      precondition="none", seed=s)
        first.append(float(fresh.timeline["waf"][0]))
    report("steady random-write MB/s / (sequential / WAF)", 1.0, ratios)
    report("fresh drive: WAF of the first window", 1.0, first)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("section", choices=["thesis", "op", "oracle", "steady", "timing", "all"])
    p.add_argument("--seeds", type=int, default=8, help="how many seeds (default 8)")
    p.add_argument("--first", type=int, default=100, help="first seed (default 100)")
    p.add_argument("--big", action="store_true", help="oracle: also the 2^20-unit cases (slow)")
    a = p.parse_args(argv)
    seeds = list(range(a.first, a.first + a.seeds))
    t0 = time.perf_counter()
    for name in (["thesis", "op", "oracle", "steady", "timing"] if a.section == "all" else [a.section]):
        if name == "oracle":
            oracle(seeds, a.big)
        else:
            globals()[name](seeds)
    print(f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
