"""Mutation check: deliberate bugs per module, each on a copy of the tree, and whether the module's tests catch it.

Each mutant is one text substitution (it must match exactly once) in a copy of the repository (without .git),
followed by the module's targeted tests (``-x``, ``-p no:cacheprovider``). A mutant is *killed* when pytest
fails, *survived* when it passes. numba compiles the mutated kernels afresh in the copy (its cache is keyed
by the file's path), so a kernel module's run takes 30-60 s; the CPU is shared, so run one module at a time.

::

    .venv/bin/python tools/mutation.py                 # every module
    .venv/bin/python tools/mutation.py ssd timing      # some
    .venv/bin/python tools/mutation.py --list          # the mutants
    .venv/bin/python tools/mutation.py ssd --only copyback   # the mutants whose description has a word
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module -> (tests run, [(file, old, new, what the bug is)])
MUTANTS: dict[str, tuple[list[str], list[tuple[str, str, str, str]]]] = {
    "timing": (["tests/test_timing.py", "tests/test_timing_inputs.py", "tests/test_timing_calibrate.py",
                "tests/test_emulate_events.py", "-m", "not privileged"], [
        ("swaptrace/timing/calibrate.py", "overhead = max(measured - modelled, 0.0) / max(faults, 1)",
         "overhead = max(measured - modelled, 0.0) / max(faults + 1, 1)", "fault overhead over one fault too many"),
        ("swaptrace/timing/calibrate.py", "        cpu = replace(cpu, write_cpu_us=wo.overhead_us)", "        pass",
         "host costs: the write overhead not handed to the fault measurement"),
        ("swaptrace/kernels/timing/steps.py", "dev = begin + lat / q", "dev = begin + lat",
         "reads hold the device for their whole latency (no Little's law)"),
        ("swaptrace/kernels/timing/steps.py", "q = k if k < dmax else dmax", "q = 1", "queue depth ignored"),
        ("swaptrace/kernels/timing/steps.py", "stall[lane] += done - issue + fault_cpu_us", "stall[lane] += done - issue",
         "fault CPU not added to the step"),
        ("swaptrace/kernels/timing/steps.py", "q = k * threads if k * threads < dmax else dmax",
         "q = k if k < dmax else dmax", "threads: a read's depth without the other threads'"),
        ("swaptrace/kernels/timing/steps.py", "nxt[lane] = b + threads", "nxt[lane] = b + 1",
         "threads: every burst dealt to every thread"),
        ("swaptrace/kernels/timing/steps.py", "out[s, OUT_STEP] = access_us[s] + dense_us[s] + stall.max()",
         "out[s, OUT_STEP] = access_us[s] + dense_us[s] + stall.sum()", "threads: the step waits for all stalls in turn"),
        ("swaptrace/kernels/timing/steps.py", "if lane < 0 or at < issue:", "if lane < 0:",
         "threads: bursts handed over thread by thread, not in the order issued"),
        ("swaptrace/timing/model.py", "        return int(n), str(meta.get(\"threads_source\")",
         "        return 1, str(meta.get(\"threads_source\")", "a stream's threads ignored"),
        ("swaptrace/timing/model.py", "            _drop_pages(region, frees, page_bytes)\n", "",
         "compute measure: a free event drops nothing"),
        ("swaptrace/kernels/timing/steps.py", "col[i] = table[i, nd - 1] * d / depths[nd - 1]",
         "col[i] = table[i, nd - 1]", "no saturation beyond the deepest depth"),
        ("swaptrace/timing/model.py", "        gap = KERNEL_BURST_GAP_US", "        gap = 0.0",
         "captured streams: bursts not merged within 50 us"),
        ("swaptrace/timing/model.py", "/ np.maximum(counts[step], 1) if n else", "/ np.maximum(counts[step] - 1, 1) if n else",
         "captured streams: rank over the wrong count"),
        ("swaptrace/timing/model.py", "return ComputeTime(np.asarray(access, float), np.asarray(dense, float), f\"baseline",
         "return ComputeTime(np.asarray(access, float), np.zeros(len(access)), f\"baseline",
         "baseline: MLP time dropped"),
        ("swaptrace/timing/model.py", "ends = [float(_run_model(req, device, compute, v, cpu, threads)",
         "ends = [float(_run_model(req, device, compute, cpu.fault_cpu_us, cpu, threads)",
         "spread: both ends priced at the central fault cost"),
        ("swaptrace/timing/model.py", "spread = (min(ends), max(ends))", "spread = (max(ends), min(ends))",
         "spread: the ends swapped"),
        ("swaptrace/timing/model.py", "fault_cpu_us_range=spread)\n    except KeyError",
         "fault_cpu_us_range=None)\n    except KeyError", "spread: a costs file loses its spread"),
        ("swaptrace/timing/calibrate.py", "fault_cpu_us=float(np.median(values))", "fault_cpu_us=values[-1]",
         "spread: the highest fault run as the cost, not the median"),
        ("swaptrace/timing/calibrate.py", "seed=seed + k)", "seed=seed)", "spread: every fault run on one seed"),
    ]),
    "emulate columns": (["tests/test_pagecache_props.py", "tests/test_traceio.py"], [
        ("swaptrace/emulate/engine.py", "if lo < 0 or hi > top:", "if False:",
         "columns: a negative page or a step past uint32 wraps around"),
        ("swaptrace/emulate/engine.py", "    if not (a.flags.c_contiguous and a.flags.writeable):\n",
         "    if False:\n", "columns: a strided column reaches the kernel as it is"),
        ("swaptrace/core/traceio.py", "                                              _string_array(dictionary))",
         "                                              pa.array(list(dictionary), pa.string()))",
         "writer: a dictionary's names through pa.array (imports pandas)"),
        ("swaptrace/core/traceio.py", "        indices = _plain_numpy(col.indices)",
         "        indices = col.indices.to_numpy(zero_copy_only=False)",
         "reader: a dictionary's codes through to_numpy (imports pandas)"),
        ("swaptrace/core/traceio.py", "    np.cumsum([len(e) for e in encoded], out=offsets[1:])",
         "    np.cumsum([len(n) for n in names], out=offsets[1:])", "writer: names' offsets in characters, not bytes"),
    ]),
    "step counts": (["tests/test_step_counts.py", "tests/test_pagecache_naive.py::test_counting_steps_as_it_goes_equals_naive",
                     "tests/test_pagecache_naive.py::test_counting_steps_as_it_goes_refuses_a_trace_out_of_step_order"], [
        ("swaptrace/kernels/emulate/loop.py", "            elif si < m[R_STEP_MAX]:\n                m[R_STEP_BACK] = 1",
         "            elif si < m[R_STEP_MAX]:\n                pass", "running counts: a step going back not noticed"),
        ("swaptrace/kernels/emulate/loop.py", "                m[R_STEP_MAX] = si\n", "                m[R_STEP_MAX] = si + 1\n",
         "running counts: the latest step taken one ahead (its rows let out unfinished)"),
        ("swaptrace/emulate/engine.py", "int(self.state.m[ks.R_STEP_MAX]) + self.first_step))",
         "int(self.state.m[ks.R_STEP_MAX]) + self.first_step + 1))", "running counts: the latest step's rows let out"),
        ("swaptrace/emulate/engine.py", "        if rows is None or final:\n", "        if rows is None:\n",
         "running counts: the rows held at the end never let out"),
        ("swaptrace/emulate/engine.py", "            self._held = {c: v[k:] for c, v in rows.items()}\n",
         "            self._held = None\n", "running counts: held rows dropped"),
        ("swaptrace/emulate/run.py", "        return _run(tf, counts=step_counts(tf, first_step, chunk_rows), progress=None, **run)",
         "        raise", "running counts: a trace out of step order is an error, not run again"),
        ("swaptrace/emulate/run.py", "    counts = None if nsteps > 0 else step_counts(tf, first_step, chunk_rows)",
         "    counts = None", "running counts: a trace without its step count in the metadata"),
        ("swaptrace/emulate/engine.py", "            rows = self._held if rows is None else {k: np.concatenate([self._held[k], v]) for k, v in rows.items()}",
         "            rows = self._held if rows is None else {k: np.concatenate([v, self._held[k]]) for k, v in rows.items()}",
         "running counts: held rows after the new ones"),
    ]),
    "zeromap": (["tests/test_zeromap.py", "tests/test_pagecache_naive.py::test_zero_stores_equal_naive",
                 "tests/test_emulate_events.py::test_events_with_zero_stores_equal_naive",
                 "tests/test_process.py::test_process_trace_equals_twin"], [
        ("swaptrace/kernels/emulate/evict.py", "        if (fl & ZEROED) and m[P_ZEROMAP]:\n",
         "        if fl & ZEROED:\n", "zero map: pages of zeros skip their write with the zero map off too"),
        ("swaptrace/kernels/emulate/evict.py", "    b[page] = TOUCHED | (fl & ZEROED)", "    b[page] = TOUCHED",
         "zero map: a page of zeros forgets it is zeros on swap"),
        ("swaptrace/kernels/emulate/loop.py", "        if zero and zeromap:  # filled with zeros",
         "        if zero and zeromap and q == page:  # filled with zeros", "zero map: read-ahead pages of zeros read"),
        ("swaptrace/kernels/emulate/loop.py", "    if m[R_WB_N] > 0 and waits:", "    if m[R_WB_N] > 0:",
         "zero map: a fault on a page of zeros waits for the writes in flight"),
        ("swaptrace/kernels/emulate/loop.py", "                fl = (fl | DIRTY) & ~ZEROED\n", "                fl = fl | DIRTY\n",
         "zero map: a store to a mapped page leaves it zeros"),
        ("swaptrace/kernels/emulate/loop.py", "| DIRTY | (0 if write else ZEROED)", "| DIRTY",
         "zero map: a zero-filling load's page is not zeros"),
        ("swaptrace/kernels/emulate/loop.py", "            if code == ACC_ZERO_STORE and b[page] & RESIDENT:\n                b[page] |= ZEROED\n",
         "", "zero map: a store of zeros that faults leaves the page non-zero"),
        ("swaptrace/kernels/emulate/linux_lists.py", " and not ((fl & ZEROED) and m[P_ZEROMAP]):", ":",
         "zero map: a page of zeros goes under writeback like a written one"),
        ("swaptrace/core/traceio.py", "        np.putmask(codes, zero & write, ACCESS_CODE_ZERO_STORE)",
         "        np.putmask(codes, zero, ACCESS_CODE_ZERO_STORE)", "zero column: a load with the flag becomes a store"),
        ("swaptrace/workload/process.py", "    return (step == 0) & write & state[region.astype(np.int64)]",
         "    return write & state[region.astype(np.int64)]", "zero stores: a training step's state updates write zeros"),
    ]),
    "ssd": (["tests/test_ssd_timing_naive.py", "tests/test_ssd_naive.py",
             "tests/test_ssd_steady.py::test_install_matches_naive_twin",
             "tests/test_ssd_steady.py::test_plan_conserves_the_pool_and_ages_blocks_evenly",
             "tests/test_ssd_steady.py::test_swap_units_take_uniformly_random_places_in_random_order",
             "tests/test_ssd_timing.py"], [
        ("swaptrace/kernels/ssd/ftl_steady.py", "        places[i], places[k] = places[k], places[i]",
         "        pass", "steady state: the swap units' places not shuffled (Floyd's order kept)"),
        ("swaptrace/ssd/simulate.py", "    return y - diff * (1.0 - t) if t >= 0.5 else x + diff * t",
         "    return x + diff * t", "a window's p99 interpolated from below only (not numpy's rule)"),
        ("swaptrace/ssd/simulate.py", '_OPTION_FIELDS = ("ip", "fp", "qslots")',
         '_OPTION_FIELDS = ("ip", "fp", "qslots", "rng")', "a kept preconditioned state restored without its rng"),
        ("swaptrace/ssd/steady.py", "np.arange(len(dyn)) < rest % len(dyn)",
         "np.arange(len(dyn)) >= len(dyn) - rest % len(dyn)", "steady state: static remainder on the oldest blocks"),
        ("swaptrace/ssd/steady.py", "clock - np.round(age)", "clock - np.floor(age)",
         "steady state: close times truncated"),
        ("swaptrace/kernels/ssd/ftl.py", "ce = cs + group_n * st.fp[F_UNIT_CHAN]", "ce = cs + st.fp[F_UNIT_CHAN]",
         "a read transfers one unit whatever its size"),
        ("swaptrace/kernels/ssd/ftl.py", "st.die_free[group_die] = ce", "st.die_free[group_die] = ready",
         "the die is free before its data left"),
        ("swaptrace/kernels/ssd/ftl.py", "ps = max(st.die_free[d], ce)", "ps = max(st.die_free[d], cs)",
         "programming starts before the transfer ends"),
        ("swaptrace/kernels/ssd/ftl.py", "programs = (moved + pu - 1) // pu", "programs = moved // pu",
         "GC: a partial program unit costs nothing"),
        ("swaptrace/kernels/ssd/ftl.py", "while st.die_free[d] < t and st.free_n[d] < bg:",
         "while st.die_free[d] <= t and st.free_n[d] <= bg:", "background GC one block too eager"),
        ("swaptrace/kernels/ssd/ftl.py", "return max(done + unit_host, st.tf[T_LINK])", "return max(done, st.tf[T_LINK])",
         "a read's last unit does not cross the host link"),
        ("swaptrace/kernels/ssd/ftl.py", "st.chan_free[c] = cs + 2.0 * moved * st.fp[F_UNIT_CHAN]",
         "st.chan_free[c] = cs + moved * st.fp[F_UNIT_CHAN]", "GC without copyback moves each unit once"),
    ]),
    "designs": (["tests/test_designs_log.py", "tests/test_designs_zns.py", "tests/test_designs_ondisk.py"], [
        ("swaptrace/designs/log.py", "pf_cap = 8 * seg if", "pf_cap = 4 * seg if", "prefetch buffer of 4 segments"),
        ("swaptrace/designs/log.py", "nsegs = max(-(-capacity // seg), cfg.high_segments + 2)",
         "nsegs = max(-(-capacity // seg), cfg.high_segments + 1)", "log one segment short of the cleaner's room"),
        ("swaptrace/designs/ondisk.py", "\"disk_s\": float(np.median(times))", "\"disk_s\": float(np.mean(times))",
         "fio replay: mean of repeats, not median"),
        ("swaptrace/designs/ondisk.py", "\"complete\": all(m[\"complete\"] for m in measured)",
         "\"complete\": measured[-1][\"complete\"]", "fio replay: complete from the last run only"),
        ("swaptrace/designs/ondisk.py", "np.searchsorted(c, max_rows, side=\"right\")", "np.searchsorted(c, max_rows)",
         "fio replay: common steps one short when a step ends at the cap"),
        ("swaptrace/designs/table.py", "base = linux.get(\"disk_s\") if linux.get(\"complete\") else None",
         "base = linux.get(\"disk_s\")", "gains against an incomplete linux replay"),
        ("swaptrace/kernels/designs/logswap.py", "if seg_state[s] != SEG_CLOSED or seg_live[s] >= seg:",
         "if seg_state[s] != SEG_CLOSED or seg_live[s] > seg:", "a full segment may be cleaned"),
        ("swaptrace/kernels/designs/logswap.py", "    seg_live[s] += 1\n", "    seg_live[s] += 2\n",
         "live counts double-counted"),
        ("swaptrace/kernels/designs/logswap.py", "if r[R_FILL] - r[R_WRITTEN] >= r[P_CHUNK]:",
         "if r[R_FILL] - r[R_WRITTEN] > r[P_CHUNK]:", "buffer flushed one page late"),
        ("swaptrace/kernels/designs/logswap.py", "        r[C_PF_HIT] += 1", "        r[C_PF_HIT] += 0",
         "prefetch hits not counted"),
        ("swaptrace/kernels/designs/logswap.py", "    r[C_SLOT_FREES] += 1", "    r[C_SLOT_FREES] += 0",
         "slot frees not counted"),
    ]),
    "pagecache": (["tests/test_calibration_regression.py"], [
        ("swaptrace/profiles/linux-6.x-cgroup1.toml", "write_costs = [3, 4, 5, 6, 8]",
         "write_costs = [1, 2, 2, 3, 4]", "profile: the device twice as fast"),
        ("swaptrace/profiles/linux-6.x-cgroup1.toml", "write_costs = [3, 4, 5, 6, 8]",
         "write_costs = [6, 8, 10, 12, 16]", "profile: the device twice as slow"),
        ("swaptrace/profiles/linux-6.x-cgroup1.toml", "fill_write_credit = 6", "fill_write_credit = 0",
         "profile: no device time while zero-filling"),
        ("swaptrace/profiles/linux-6.x-cgroup1.toml", "stats_flush_steps = 1", "stats_flush_steps = 0",
         "profile: statistics always fresh"),
        ("swaptrace/profiles/linux-6.x-cgroup1.toml", "zero_page = true", "zero_page = false",
         "profile: no zero page"),
        ("swaptrace/profiles/linux-6.x-cgroup1.toml", "write_cost = 4\n", "write_cost = 6\n",
         "profile: the single (--no-ensemble) run's device 1.5x slower"),
        ("swaptrace/profiles/linux-6.x-cgroup1.toml", "write_cost = 4\n", "write_cost = 8\n",
         "profile: the single run's device twice as slow"),
    ]),
    "fio runner": (["tests/test_fio_runner_paths.py", "tests/test_fio_run.py"], [
        ("swaptrace/fio/runner.py", "    if free < need_bytes:", "    if free < need_bytes - (1 << 30):",
         "free-space check off by 1 GiB"),
        ("swaptrace/fio/runner.py", "extra = max(0, size_bytes - st.st_size)", "extra = size_bytes",
         "an existing target needs its whole size free again"),
        ("swaptrace/fio/runner.py", "start = target.current_bytes - target.current_bytes % FILL_CHUNK_BYTES",
         "start = 0", "extension rewrites the whole file"),
        ("swaptrace/fio/runner.py", "    with sigterm_as_interrupt():", "    with contextlib.nullcontext():",
         "SIGTERM not turned into an interrupt"),
        ("swaptrace/fio/runner.py", "            shutil.rmtree(tmp, ignore_errors=True)\n            raise",
         "            raise", "partial results left behind"),
        ("swaptrace/fio/runner.py", "            buf = rng.bytes(n)", "            buf = bytes(n)",
         "target filled with zeros"),
    ]),
    "fio busy": (["tests/test_fio_busy.py"], [
        ("swaptrace/fio/busy.py", ' and job.get("kind") not in ("precondition", "steady")', "",
         "burners beside the steady-state rounds"),
        ("swaptrace/fio/busy.py", 'if j.get("jobname") != BUSY_JOB), None)', "), None)",
         "the first job read, burner or not"),
        ("swaptrace/fio/busy.py", 'f"numjobs={count}\\n"', '"numjobs=1\\n"', "one burner whatever the count"),
        ("swaptrace/fio/runner.py", '            str(self.job_file_for(step, raw_dir)),',
         '            str((self.jobs_dir / step.job["file"]).resolve()),', "the burners' copy never given to fio"),
        ("swaptrace/fio/runner.py", "return bool(self.busy_cpus) and busymod.applies_to(step.job)",
         "return bool(self.busy_cpus)", "burners beside the fills too"),
        ("swaptrace/fio/busy.py", 'return job_file_text.rstrip("\\n") + "\\n\\n" + job_text(count)',
         'return job_text(count)', "the measured job left out of its own file"),
        ("swaptrace/fio/runner.py", "    if not 0 <= busy_cpus <= cpus:", "    if not 0 <= busy_cpus:",
         "more burners than CPUs accepted"),
        ("swaptrace/timing/device_profile.py", '"busy_cpus": int((run.get("busy_cpus") or {}).get("count", 0))',
         '"busy_cpus": 0', "the profile forgets the load it was measured under"),
    ]),
    "devicefit": (["tests/test_fit_read_curve.py", "tests/test_fit_roundtrip.py"], [
        ("swaptrace/ssd/fit/reads.py", "                w = 1.0 / lat[fit]  # relative errors: small and large reads count alike",
         "                w = np.ones_like(lat[fit])", "absolute, not relative, read-latency errors"),
        ("swaptrace/ssd/fit/reads.py", "                    best = (key, dict(page_bytes=pu_bytes, channels=channels, read_us=float(a - u_h),",
         "                    best = (key, dict(page_bytes=pu_bytes, channels=channels, read_us=float(a),",
         "the host link's time left in the flash read"),
        ("swaptrace/ssd/fit/reads.py", "    return float(err.max()), float(np.sqrt(np.mean(np.square(err))))",
         "    return float(np.sqrt(np.mean(np.square(err)))), float(err.max())", "the dies search lowers the RMS, not the worst job"),
        ("swaptrace/ssd/fit/reads.py", "            phase = user_units % (pu * channels)", "            phase = 0",
         "the stripe's phase at the user capacity ignored"),
    ]),
    "fio steady": (["tests/test_fio_steady.py"], [
        ("swaptrace/fio/steady.py", "    seen = iops > 0\n", "    seen = iops >= 0\n",
         "a window's empty slots counted in its mean"),
        ("swaptrace/fio/steady.py", "    elif out[\"range_pct\"] is None or out[\"range_pct\"] > opts.range_pct:",
         "    elif out[\"range_pct\"] is None:", "the range criterion never refuses"),
        ("swaptrace/fio/steady.py", "    if not attained:\n", "    if False:\n",
         "steady without fio's slope criterion attained"),
        ("swaptrace/fio/steady.py", "excursion_pct=100.0 * abs(slope) * (len(rounds) - 1) / mean if mean else None)",
         "excursion_pct=100.0 * abs(slope) / mean if mean else None)", "excursion is the slope of one round"),
        ("swaptrace/fio/steady.py", "    idx = np.minimum((np.maximum(t - 1e-9, 0) // (round_s * 1000.0)).astype(np.int64), 10**9)",
         "    idx = np.minimum((np.maximum(t, 0) // (round_s * 1000.0)).astype(np.int64), 10**9)",
         "a sample at a round's end starts the next round"),
    ]),
    "torchrec": (["tests/test_train_torchrec.py"], [
        ("swaptrace/workload/train_torchrec.py", "    optimizer.step()\n    return float(loss.detach())",
         "    return float(loss.detach())", "the MLPs' optimizer never steps"),
        ("swaptrace/workload/train_torchrec.py", "    loss.backward()\n", "",
         "no backward (no fused table update either)"),
        ("swaptrace/workload/train_torchrec.py", "    lengths = np.concatenate([np.diff(np.asarray(off, dtype=np.int64)) for _, off in bags])",
         "    lengths = np.concatenate([np.asarray(off, dtype=np.int64)[1:] for _, off in bags])",
         "bag lengths taken as offsets"),
        ("swaptrace/workload/train_torchrec.py", "    \"rowwise-adagrad\": (\"torchrec.optim.RowWiseAdagrad\", \"Adagrad\")}",
         "    \"rowwise-adagrad\": (\"torch.optim.Adagrad\", \"Adagrad\")}", "row-wise Adagrad trained as Adagrad"),
        ("swaptrace/workload/train_torchrec.py", "        mark_step(lookups.step)\n", "",
         "steps not marked"),
        ("swaptrace/workload/train_torchrec.py", "    kjt = KeyedJaggedTensor(keys=list(keys), values=",
         "    kjt = KeyedJaggedTensor(keys=list(reversed(keys)), values=", "bags given to the wrong tables"),
    ]),
    "recording": (["tests/test_recording.py"], [
        ("swaptrace/capture/recorder.py", "    effective = cpu * cpu / sum(c * c for c in busy)",
         "    effective = cpu / ((inside[-1][\"t_ns\"] - inside[0][\"t_ns\"]) / 1e9)",
         "threads: CPU time over wall time taken for the busy threads"),
        ("swaptrace/capture/recorder.py", "    busy = sorted((max(c - first.get(tid, 0.0), 0.0) for tid, c in last.items()), reverse=True)",
         "    busy = sorted((max(c - first.get(tid, c), 0.0) for tid, c in last.items()), reverse=True)",
         "threads: a thread started in the steps not counted"),
        ("swaptrace/capture/recording.py", "            out = self._free(pid, sp, lo, hi, unmap=True)  # MAP_FIXED over memory replaces it\n",
         "            out = []\n", "mmap over touched memory does not free it"),
        ("swaptrace/capture/recording.py", "            if page in sp.touched:\n", "            if False:\n",
         "a page's second fault counted as a first touch"),
        ("swaptrace/capture/recording.py", "                return [(RETOUCH, pid, page, 1, bool(write), 0)] if self.retouch else []",
         "                return [(RETOUCH, pid, page, 1, bool(write), 0)]",
         "a recording without --pageout gets re-touches (a zero page's write fault, say)"),
        ("swaptrace/capture/record_parse.py", "            if _HEXNUM.match(address) and _hex(address) < USER_ADDRESS_END:",
         "            if _HEXNUM.match(address):", "the kernel's faults at kernel addresses kept"),
        ("swaptrace/capture/record_parse.py", "        elif name == \"page_fault_kernel\":", "        elif False:",
         "the kernel's faults on the program's memory dropped"),
        ("swaptrace/capture/pageout.py", "    return max(1 << 20, min(total, free // 2))", "    return max(1 << 20, total)",
         "--pageout: the default swap not held to half the free space"),
        ("swaptrace/capture/recorder.py", "    if not size or 2 * peak <= size:", "    if not size or peak <= size:",
         "--pageout: warned only when the program outgrows the swap, not half of it (vm_swap_full)"),
        ("swaptrace/capture/recording.py", "        elif code == EV[\"madvise\"] and int(flags) in FREEING_ADVICE:",
         "        elif code == EV[\"madvise\"]:", "every madvise frees (MADV_WILLNEED too)"),
        ("swaptrace/capture/recording.py", "            self.spaces[pid] = src.copy() if src is not None else _Space()",
         "            self.spaces[pid] = _Space()", "a forked child starts without its parent's memory"),
        ("swaptrace/capture/recording.py", "            return self._free(pid, sp, max(new_hi, heap_lo), old_hi, unmap=True)",
         "            return []", "a shrinking brk frees nothing"),
        ("swaptrace/capture/recording.py", "        keep = min(old_n, new_n)", "        keep = old_n",
         "mremap shrinking keeps the cut-off pages"),
        ("swaptrace/capture/recording.py", "            if repeats < min_repeats or int(deltas[a:a + p].sum()) != 0 or not deltas[a:a + p].any():",
         "            if repeats < min_repeats or not deltas[a:a + p].any():", "an unbalanced period counts as a step"),
        ("swaptrace/capture/record_parse.py", "            out.events.append((t, EV[\"fault\"], pid, _hex(kv[\"address\"]), 0, bool(err & 2), err, 0, 0))",
         "            out.events.append((t, EV[\"fault\"], pid, _hex(kv[\"address\"]), 0, bool(err & 1), err, 0, 0))",
         "a fault's write bit read from the wrong bit"),
        ("swaptrace/capture/record_parse.py", "    if ret >= ERR_RET:\n        out.failed_calls += 1\n        return",
         "    if False:\n        pass", "a failed mmap recorded as a mapping"),
        ("swaptrace/capture/record_parse.py", "        elif name == \"sched_process_exit\" and kv.get(\"group_dead\") == \"true\":",
         "        elif name == \"sched_process_exit\":", "a thread's exit frees its process's memory"),
        ("swaptrace/capture/recorder.py", "            self.line_readings.queue.put(self.live.lines)",
         "            self._boundary(self.live.lines)", "--step-line: the reading runs in the tee (the next line waits)"),
        ("swaptrace/capture/recorder.py", "                latest = nxt\n", "                self.boundary(latest)\n                latest = nxt\n",
         "--step-line: lines that came during a reading each read again"),
        ("swaptrace/capture/recorder.py", "            if latest is None:\n                return\n",
         "            if latest is None:\n                continue\n", "--step-line: readings go on after finish()"),
    ]),
    "process": (["tests/test_process.py", "tests/test_runtime_profile.py"], [
        ("swaptrace/workload/process.py", "        kinds += [\"table-state\", \"mlp-state\"]", "        kinds += [\"table-state\"]",
         "eager optimizer state: the MLPs' state not written at start-up"),
        ("swaptrace/workload/process.py", "    if optimizer in EAGER_STATE_OPTIMIZERS:\n        kinds +=",
         "    if True:\n        kinds +=", "lazily allocated optimizer state written at start-up"),
        ("swaptrace/workload/process.py", "    kinds = [\"runtime\", \"table\", \"mlp\"]", "    kinds = [\"table\", \"mlp\", \"runtime\"]",
         "start-up writes the runtime after the model"),
        ("swaptrace/workload/process.py", "picks = (np.arange(n, dtype=np.uint64) * np.uint64(r[\"pages\"])) // np.uint64(max(n, 1))",
         "picks = np.arange(n, dtype=np.uint64)", "the runtime's active part at its start, not spread over it"),
        ("swaptrace/workload/process.py", "n = min(r[\"pages\"], _pages(profile.active_bytes, page_bytes))",
         "n = min(r[\"pages\"], profile.active_bytes // page_bytes)", "active bytes rounded down to pages"),
        ("swaptrace/workload/process.py", "            next_page += pages\n", "",
         "the step buffers laid over the runtime"),
        ("swaptrace/workload/process.py",
         "    boot = np.concatenate([startup_pages(regions, optimizer), active_pages(regions, profile, page_bytes)])",
         "    boot = startup_pages(regions, optimizer)", "start-up: the runtime's active part not used again after the model"),
        ("swaptrace/workload/process.py", "starts = np.flatnonzero(np.r_[st[0] != last_step, st[1:] != st[:-1]])",
         "starts = np.flatnonzero(np.r_[True, st[1:] != st[:-1]])", "a step spanning chunks gets its runtime stores twice"),
        ("swaptrace/workload/process.py", "    overhead = profile.file_bytes + profile.kernel_bytes",
         "    overhead = profile.file_bytes", "budget: kernel memory not subtracted"),
        ("swaptrace/workload/process.py", "    if budget <= 0 or math.isnan(budget):", "    if budget < 0 or math.isnan(budget):",
         "budget: a limit leaving no anonymous memory accepted"),
    ]),
    "runtime profile": (["tests/test_runtime_profile.py", "tests/test_process.py::test_derive_from_capture_numbers",
                        "tests/test_process.py::test_derive_active_part_and_lazy_state_by_hand"], [
        ("swaptrace/capture/runtime_profile.py", "    step = max(0, peak - end - mb[\"lazy\"])", "    step = max(0, peak - end)",
         "lazily written model arrays counted as step buffers"),
        ("swaptrace/capture/runtime_profile.py", "        raw = ref - touched - step", "        raw = ref - touched",
         "step buffers counted in the active runtime"),
        ("swaptrace/capture/runtime_profile.py", "        active = min(runtime, max(0, raw))", "        active = max(0, raw)",
         "active part not bounded by the runtime"),
        ("swaptrace/capture/runtime_profile.py", "    file_bytes = int(max(files)) if files else 0",
         "    file_bytes = int(files[0]) if files else 0", "page cache from the unlimited run only"),
        ("swaptrace/capture/runtime_profile.py", "    raw_kernel = int(peak_r.get(\"usage\") or 0) - peak - int(peak_r.get(\"file\") or 0)",
         "    raw_kernel = int(peak_r.get(\"usage\") or 0) - peak", "kernel memory includes the page cache"),
        ("swaptrace/capture/runtime_profile.py",
         "    eager = {\"table\", \"mlp\"} | ({\"table-state\", \"mlp-state\"} if spec.optimizer in EAGER_STATE_OPTIMIZERS else set())",
         "    eager = {\"table\", \"mlp\", \"table-state\", \"mlp-state\"}", "lazy optimizer state counted at start-up"),
        ("swaptrace/capture/runtime_profile.py", "    if peak < end + mb[\"lazy\"]:", "    if peak < end:",
         "a peak below start-up plus the lazy arrays not refused"),
        ("swaptrace/capture/runtime_profile.py", "    if marks is not None and steps > marks:",
         "    if marks is not None and steps >= marks:", "as many steps as marked refused"),
        ("swaptrace/capture/runtime_profile.py", "    runtime = max(0, end - mb[\"startup\"])",
         "    runtime = max(0, end - mb[\"footprint\"])", "runtime less the whole model, lazy arrays too"),
    ]),
    "process trace": (["tests/test_recgen.py"], [
        ("swaptrace/capture/process_trace.py", "                             **_threads(rt.info.get(\"cpu\"), self.path),\n", "",
         "a recording's threads left out of the process trace"),
        ("swaptrace/emulate/run.py", "        **_threads(tf.meta),\n", "", "the trace's threads not passed to the stream"),
        ("swaptrace/capture/process_trace.py", "    return need <= pages <= need + 1 + need // 64",
         "    return need <= pages <= need + 1", "no room for an allocator that rounds sizes up"),
        ("swaptrace/capture/process_trace.py", "key=lambda i: (allocs[i][2] - need, i), default=None)",
         "key=lambda i: (i, allocs[i][2] - need), default=None)", "first fit, not the closest in size"),
        ("swaptrace/capture/process_trace.py", "for a in sorted(arrays, key=lambda a: (-a.nbytes, a.name)):",
         "for a in sorted(arrays, key=lambda a: (a.nbytes, a.name)):", "smallest arrays matched first"),
        ("swaptrace/capture/process_trace.py", "        return r - cycle + 1 + (step - r - 1) % cycle",
         "        return 1 + (step - r - 1) % r", "steps beyond the recording repeat all of it, not its last half"),
        ("swaptrace/capture/process_trace.py", "pick = cand[np.argsort(-seqs[a:b][cand], kind=\"stable\")][:want]",
         "pick = cand[np.argsort(seqs[a:b][cand], kind=\"stable\")][:want]", "referenced loads go to the oldest pages first"),
        ("swaptrace/capture/process_trace.py", "        want = int(refd) - len(fresh)", "        want = int(refd)",
         "pages touched in the step loaded again as referenced"),
        ("swaptrace/capture/process_trace.py", "            while readings and readings[0][0] <= i:",
         "            while False:", "every reading's loads at the step's end, not where it was taken"),
        ("swaptrace/capture/process_trace.py",
         "                                      pos=base + i, page_of=page_of)\n                touched = set()",
         "                                      pos=base + i, page_of=page_of)",
         "a reading's window not restarted: pages first touched before it counted as fresh"),
        ("swaptrace/capture/process_trace.py",
         "sorted(loaded[c:d].tolist(), key=lambda kk: -self.loaded[kk])[:want]",
         "sorted(loaded[c:d].tolist(), key=lambda kk: self.loaded[kk])[:want]",
         "--pageout: the stores that did not fault put on the least recently loaded pages"),
        ("swaptrace/capture/process_trace.py", "want = min(int(dirty) - int(b - a), int(d - c))",
         "want = min(int(dirty), int(d - c))", "--pageout: dirty pages not less the window's faulting stores"),
        ("swaptrace/capture/process_trace.py", "                    rows.append((page_of[key][0], arg, EVENT_ACCESS, "
         "page_of[key][1]))\n                    window.used(key, arg, base + i)",
         "                    window.used(key, arg, base + i)", "--pageout: re-touches left out of the trace"),
        ("swaptrace/capture/process_trace.py", "        self.stored, self.loaded = set(), {}\n        return out",
         "        return out", "--pageout: a reading's window not restarted"),
        ("swaptrace/capture/process_trace.py", "    if pageout:\n        values = [", "    if False:\n        values = [",
         "--pageout: kernel memory from usage less anonymous and page cache, not kmem"),
        ("swaptrace/capture/recording.py", 'retouch=bool(meta.get("pageout")))', "retouch=False)",
         "--pageout: re-faults read as nothing"),
        ("swaptrace/capture/process_trace.py", "    return None if m is None or pos < m[2] else (m[0], m[1])",
         "    return None if m is None else (m[0], m[1])",
         "a matched array's addresses are the model's before it was allocated (a freed buffer's life before it)"),
        ("swaptrace/capture/process_trace.py", "                    born[firsts[f][1]] = pos",
         "                    born[firsts[f][1]] = min(born[firsts[f][1]], pos) if born[firsts[f][1]] else pos",
         "a matched range born at the first allocation over it, not the last"),
        ("swaptrace/capture/process_trace.py", "            if alive[j] and repeat:", "            if repeat:",
         "a repeated step drops every alloc, not only those over live memory"),
        ("swaptrace/capture/process_trace.py", "    return pages[~np.isin(pages, written)]", "    return pages",
         "start-up stores repeated for arrays a match already wrote"),
        ("swaptrace/capture/process_trace.py", "        runtime |= alive\n    return order, runtime",
         "    runtime |= alive\n    return order, runtime", "runtime: only pages alive at the recording's end"),
        ("swaptrace/capture/process_trace.py", "    run_keys = sorted(k for k in order if k in runtime)",
         "    run_keys = sorted((k for k in order if k in runtime), key=order.__getitem__)",
         "runtime pages numbered in first-touch order, not by address"),
        ("swaptrace/capture/process_trace.py",
         "    return recorded - (1 if not exit_told and recorded > 1 else 0)",
         "    return recorded", "the last step holding the exit kept"),
        ("swaptrace/capture/process_trace.py", '    scratch = np.array([r["kind"] == "scratch" for r in regions], dtype=bool)',
         '    scratch = np.array([False for r in regions], dtype=bool)', "the spec's scratch kept beside the recording's"),
        ("swaptrace/capture/process_trace.py", "                gaps.append((k, i, rss[at[i]] - len(alive)))",
         "                gaps.append((k, i, rss[at[i]]))", "unrecorded: the whole RSS, not what the recording missed"),
        ("swaptrace/capture/process_trace.py", "        need = gap if cap is None else min(gap, cap)",
         "        need = gap", "unrecorded: a start-up reading's lag kept (no cap by what persists)"),
        ("swaptrace/capture/process_trace.py", "            elif code == FREE:\n                alive.discard(key)\n    training",
         "            elif code == FREE:\n                pass\n    training", "unrecorded: freed pages still counted recorded"),
        ("swaptrace/capture/process_trace.py",
         "        if k == 0:  # found by a reading after the step's last op\n",
         "        if False:\n", "unrecorded: the last reading's growth dropped"),
        ("swaptrace/capture/process_trace.py", "            made = grow.pop(0)[1]\n        return out_rows",
         "            grow.pop(0)\n        return out_rows", "unrecorded: each reading stores from the region's start"),
        ("swaptrace/capture/process_trace.py", "    training = [r for r in readings if 1 <= int(r.get(\"step\", -1)) < n_steps]",
         "    training = [r for r in readings if 0 <= int(r.get(\"step\", -1)) < n_steps]", "kernel memory: start-up's readings counted"),
        ("swaptrace/capture/process_trace.py", "    training = [r for r in readings if 1 <= int(r.get(\"step\", -1)) < n_steps]",
         "    training = [r for r in readings if 1 <= int(r.get(\"step\", -1)) <= n_steps]", "kernel memory: the exit's readings counted"),
        ("swaptrace/capture/process_trace.py", "    kernel = max(0, int(np.median(values)))", "    kernel = max(0, int(max(values)))",
         "kernel memory: the most, not the median"),
        ("swaptrace/capture/process_trace.py", "    kernel = max(0, int(np.median(values)))", "    kernel = int(np.median(values))",
         "kernel memory: a negative reading not clamped"),
        ("swaptrace/capture/process_trace.py",
         "    values = [int(r[\"group_bytes\"]) - int(r[\"group_anon_bytes\"]) - int(r[\"group_file_bytes\"])",
         "    values = [int(r[\"group_bytes\"]) - int(r[\"group_anon_bytes\"])",
         "kernel memory: page cache counted as kernel memory"),
        ("swaptrace/capture/process_trace.py", "                             \"kernel_bytes\": rt.info.get(\"kernel_bytes\") or 0,",
         "                             \"kernel_bytes\": 0,", "kernel memory: measured but not passed to the trace"),
        ("swaptrace/capture/recorder.py", "                self.group.procs_file.write_text(str(self.proc.pid))\n",
         "                pass\n", "kernel memory: the program never put in its group"),
        ("swaptrace/capture/recorder.py", "        out = {\"group_bytes\": usage, \"group_anon_bytes\": int(kinds[\"anon\"]),",
         "        out = {\"group_bytes\": usage, \"group_anon_bytes\": 0,", "kernel memory: the group's anonymous memory not read"),
    ]),
    "taskstats": (["tests/test_taskstats.py"], [
        ("swaptrace/capture/taskstats.py", "    return head + payload + b\"\\0\" * (_align4(len(payload)) - len(payload))",
         "    return head + payload", "attributes not padded to 4 bytes"),
        ("swaptrace/capture/taskstats.py", "out.append((kind & 0x3FFF, data[i + _NLATTR.size: i + length]))",
         "out.append((kind, data[i + _NLATTR.size: i + length]))", "nested attribute flags kept in the type"),
        ("swaptrace/capture/taskstats.py", "(\"ac_tgid\", \"I\"), (\"\", \"4x\"),", "(\"ac_tgid\", \"I\"),",
         "struct taskstats: the pad after ac_tgid missing"),
        ("swaptrace/capture/taskstats.py", "        if kind == TASKSTATS_TYPE_AGGR_PID:",
         "        if kind in (TASKSTATS_TYPE_AGGR_PID, TASKSTATS_TYPE_AGGR_TGID):", "a thread group's aggregate summed again"),
        ("swaptrace/capture/stalls.py", "        acc[f\"{name}_us\"] += int(st.get(total, 0)) // 1000",
         "        acc[f\"{name}_us\"] += int(st.get(total, 0))", "delays kept in ns, not us"),
        ("swaptrace/capture/stalls.py", "                if tgid in self.known or ppid in self.known:",
         "                if tgid in self.known:", "a child process's exit not counted as the tree's"),
        ("swaptrace/capture/stalls.py", "                    if tid in self.exited:\n                        continue\n", "",
         "an exited thread counted twice"),
        ("swaptrace/capture/stalls.py", "    idle = fields[3] + fields[4]", "    idle = fields[3]",
         "iowait counted as busy CPU"),
        ("swaptrace/capture/stalls.py", "\"quiet\": current <= max_load}", "\"quiet\": True}",
         "a timed-out wait reported quiet"),
        ("swaptrace/capture/stalls.py", "    other = max(0.0, last[\"busy_s\"] - first[\"busy_s\"] - tree_cpu_s)",
         "    other = max(0.0, last[\"busy_s\"] - first[\"busy_s\"])", "the tree's own CPU counted as other processes'"),
    ]),
    "train": (["tests/test_train.py", "tests/test_train_memory.py::test_memory_need_worked_by_hand"], [
        ("swaptrace/workload/train.py", "    for opt in optimizers:\n        opt.step()\n", "",
         "the optimizers never step"),
        ("swaptrace/workload/train.py", "s.index_add_(0, rows, values.pow(2).mean(dim=1))",
         "s.index_add_(0, rows, values.pow(2).sum(dim=1))", "row-wise Adagrad sums the squared gradient, not its mean"),
        ("swaptrace/workload/train.py", "                g = p.grad.coalesce()", "                g = p.grad",
         "row-wise Adagrad: duplicate rows not summed first"),
        ("swaptrace/workload/train.py", "        mark_step(lookups.step)\n", "        mark_step(lookups.step + 1)\n",
         "steps marked one off"),
        ("swaptrace/workload/train.py", "        if last_relu or i < len(widths) - 2:", "        if last_relu or i < len(widths) - 1:",
         "a ReLU after the logit"),
        ("swaptrace/workload/train.py", "        return [torch.optim.SparseAdam(tables, lr=lr), torch.optim.Adam(dense, lr=lr)]",
         "        return [torch.optim.SparseAdam(tables, lr=lr)]", "adam: the MLPs never step"),
        ("swaptrace/workload/train.py", "    rng = np.random.default_rng([seed, step])", "    rng = np.random.default_rng(seed)",
         "the same dense features and labels every step"),
        ("swaptrace/workload/train.py", "    return {**terms, \"need\": fixed + max(terms[\"activations\"], terms[\"gradients\"])}",
         "    return {**terms, \"need\": fixed + terms[\"activations\"]}", "memory need leaves out the gradients"),
        ("swaptrace/workload/train.py", "        bound = math.sqrt(1.0 / t.rows)", "        bound = math.sqrt(1.0 / t.dim)",
         "tables initialised by dim, not rows"),
    ]),
    "plug rules": (["tests/test_pagecache_wb_level.py"], [
        ("swaptrace/kernels/emulate/linux_lists.py", "BLK_MAX_REQUEST_COUNT = 32", "BLK_MAX_REQUEST_COUNT = 64", "a plug holds 64 requests"),
        ("swaptrace/kernels/emulate/linux_lists.py", "head_full = m[R_PLUG_HEAD] * m[P_PAGE_BYTES] >= BLK_PLUG_FLUSH_SIZE", "head_full = False",
         "the first request's size never sends the plug"),
        ("swaptrace/kernels/emulate/linux_lists.py", "    if m[R_PLUG_REQS] == 1:  # the first request grows", "    if m[R_PLUG_REQS] >= 1:  # the first request grows",
         "the plug's last request taken for its first"),
        ("swaptrace/kernels/emulate/linux_lists.py", "        if m[R_NESTED]:  # inside a swap-in's plug", "        if False:  # inside a swap-in's plug",
         "a level inside a swap-in's plug sends it at its end"),
        ("swaptrace/kernels/emulate/loop.py", "        if not m[R_NESTED]:  # a swap-in's plug stays open", "        if True:  # a swap-in's plug stays open",
         "a reclaim call inside a swap-in's plug issues its last request"),
        ("swaptrace/kernels/emulate/loop.py", "            _make_room(b, m, f, i + 1)", "            _make_room(b, m, f, 1)",
         "a window's pages read before this one not counted when it is charged"),
        ("swaptrace/kernels/emulate/loop.py", "    if charged:  # blk_finish_plug: the writes", "    if False:  # blk_finish_plug: the writes",
         "a swap-in's plugged writes left off the device until the next plug"),
        ("swaptrace/kernels/emulate/linux_lists.py", "    m[R_WB_PLUGGED] = 0\n    m[R_PLUG_REQS] = 0\n", "    m[R_WB_PLUGGED] = 0\n",
         "a plug sent to the device keeps its request count"),
        ("swaptrace/kernels/emulate/linux_lists.py", "    if upto == WB_ALL:  # a sleep sent the plug", "    if False:  # a sleep sent the plug",
         "a sleep's flush keeps the plug's request count"),
    ]),
    "sensitivity": (["tests/test_emulate_sensitivity.py"], [
        ("swaptrace/emulate/run.py", "for d in (-fraction, fraction)]", "for d in (fraction, fraction)]",
         "both neighbours above the budget"),
        ("swaptrace/emulate/run.py", "budget_pages=member_budget_pages(cfg.budget_pages, d, footprint))",
         "budget_pages=cfg.budget_pages)", "the neighbours at the run's own budget"),
        ("swaptrace/emulate/run.py", "_sensitivity(tf, run_cfg, sensitivity,", "_sensitivity(tf, config, sensitivity,",
         "the budget asked for varied, not the ensemble's member written"),
        ("swaptrace/emulate/run.py", "passes = 1 + bool(members) + bool(sensitivity)", "passes = 1 + bool(members)",
         "progress counts the extra pass as the trace's"),
        ("swaptrace/emulate/run.py", "[getattr(c, key) for c in runs.counters]",
         "[getattr(c, key) for c in runs.counters[::-1]]", "the neighbours' counts swapped"),
        ("swaptrace/commands/emulate.py", "sensitivity=sensitivity / 100 if", "sensitivity=sensitivity if",
         "the percent taken as a fraction"),
    ]),
    "events": (["tests/test_emulate_events.py", "tests/test_mrc_events.py", "tests/test_export.py::test_events_are_left_out"], [
        ("swaptrace/kernels/emulate/release.py", "    if m[m[O_SLOT] + page] >= 0:\n        _free_slot(m, page)\n    m[R_RESIDENT]",
         "    m[R_RESIDENT]", "a freed resident page keeps its swap slot"),
        ("swaptrace/kernels/emulate/release.py", "    m[m[O_SHADOW] + page] = -1\n", "",
         "a freed page keeps its refault shadow"),
        ("swaptrace/kernels/emulate/release.py", "        if fl & WRITEBACK:", "        if False:",
         "a page under writeback freed at once"),
        # dropped, equivalent: "a forgotten write's plug count kept" (release.py ``m[R_WB_PLUGGED] -= 1``): every
        # reclaim level ends with _unplug (linux_lists.py), so no write is plugged when the program touches a page
        ("swaptrace/kernels/emulate/linux_lists.py", "        if fl & FREED:\n            _drop(b, m, page)\n        elif",
         "        if", "a page freed under writeback never dropped"),
        ("swaptrace/kernels/emulate/loop.py", "    m[C_ACCESSES] += i - start - events", "    m[C_ACCESSES] += i - start",
         "events counted as accesses"),
        ("swaptrace/kernels/mrc/stack.py", "        reg[1] -= 1\n        last[p] = -2", "        last[p] = -2",
         "a freed page still counted in the stack"),
        ("swaptrace/workload/export.py", "            pages = np.ascontiguousarray(pages[kept])", "            pass",
         "next-access times count event rows"),
    ]),
    "command reclaim": (["tests/test_capture_command_privileged.py::test_trace_reclaim_counts_the_programs_reclaim_by_step",
                         "tests/test_capture_command.py::test_trace_reclaim_reaches_a_program_capture"], [
        ("swaptrace/capture/command.py", "        marks = [(t, \"step\", n + 1) for t, n in run.marks]",
         "        marks = [(t, \"step\", n) for t, n in run.marks]", "a program's mark n starts step n (start-up lost)"),
        ("swaptrace/capture/command.py", "            self.extra_events = RECLAIM_EVENTS", "            pass",
         "--trace-reclaim -- CMD traces no reclaim event"),
        ("swaptrace/commands/capture.py", "                         trace_reclaim=trace_reclaim)\n        return",
         "                         trace_reclaim=False)\n        return", "the flag does not reach the program's capture"),
    ]),
}


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis",
                                    "traces", "fio_jobs", "*.parquet")
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def run_mutant(module: str, file: str, old: str, new: str, timeout_s: int) -> tuple[str, float]:
    tests, _ = MUTANTS[module]
    with tempfile.TemporaryDirectory(prefix="swaptrace-mutant-") as tmp:
        tree = Path(tmp) / "tree"
        _copy_tree(tree)
        path = tree / file
        text = path.read_text()
        if text.count(old) != 1:
            return f"not applied ({text.count(old)} matches)", 0.0
        path.write_text(text.replace(old, new))
        env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": str(Path(tmp) / "numba")}
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                                  cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return "killed (timeout)", time.time() - t0
        if proc.returncode == 0:
            return "survived", time.time() - t0
        if proc.returncode == 1:
            return "killed", time.time() - t0
        if proc.returncode < 0:  # the bug took the test process down (e.g. a SIGTERM nobody catches)
            return f"killed (test process died of signal {-proc.returncode})", time.time() - t0
        return f"error (pytest exit {proc.returncode})", time.time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help=f"modules to mutate (default all: {', '.join(MUTANTS)})")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--only", default=None, metavar="TEXT", help="run only the mutants whose description has TEXT")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per mutant's test run")
    args = ap.parse_args(argv)
    unknown = [m for m in args.modules if m not in MUTANTS]
    if unknown:
        print(f"mutation.py: unknown module(s) {', '.join(unknown)}; choose from {', '.join(MUTANTS)}", file=sys.stderr)
        return 2
    modules = args.modules or list(MUTANTS)
    if args.list:
        for m in modules:
            for file, _, _, what in MUTANTS[m][1]:
                print(f"{m}: {file}: {what}")
        return 0
    print("| module | mutant | result | s |\n|---|---|---|---|", flush=True)
    totals = {}
    for m in modules:
        killed = n = 0
        for file, old, new, what in MUTANTS[m][1]:
            if args.only and args.only not in what:
                continue
            result, secs = run_mutant(m, file, old, new, args.timeout)
            n += 1
            killed += result.startswith("killed")
            print(f"| {m} | {what} | {result} | {secs:.0f} |", flush=True)
        totals[m] = (killed, n)
    print()
    for m, (k, n) in totals.items():
        print(f"{m}: {k} of {n} killed ({k / max(n, 1):.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
