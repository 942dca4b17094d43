"""Every command against a table of bad inputs: one line on stderr, exit 2, no traceback, nothing left.

The table is built from option classes (docs/safety.md lists them): each command's numeric options get
non-numbers, negatives, zero, nan, inf and huge values; sizes get junk and absurd sizes; choices get
unknown names; file arguments get missing files, folders, plain Parquet, text, empty files, the wrong
kind and a trace whose data pages are corrupt under a valid footer; plus rows for single options
(``ssd synth --volume nanx``, ``fio import`` of malformed logs, bad model specs, ...). For each row the
test snapshots the output folder (and the inputs' folder) before and after: no new file anywhere.
A few rows also run as real subprocesses to see the interpreter's own stderr.

Every row first runs a control: the same command with a good value in place of the bad one (or the option
left out). The control must succeed, so a row cannot pass by failing on something other than what it names
(the default device at a small capacity, a missing folder argument). The row's one error line must then
name the option or the file it is about. Rows for damaged files come from tests/damaged.py: every damaged
variant of an access trace, a swap stream and a dataset folder, given to every command that reads that kind.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from damaged import (
    capture_variants,
    damage,
    dataset_variants,
    fake_capture,
    fio_results_variants,
    make_dataset,
    parquet_variants,
    process_variants,
)
from safety_helpers import fake_run_dir, invoke, make_inputs, snapshot

# where a row's own outputs go; replaced per row by a fresh folder
OUT = "{out}"

#: host-costs files (``costs_ok``, fault cost 1.5 us) with a bad ``fault_cpu_us_range``
COSTS_SPREADS = {"outside": "[2.0, 3.0]", "reversed": "[3.0, 1.0]", "one-value": "[1.0]", "text": '["a", 2.0]',
                 "bool": "[true, 2.0]", "not-a-list": "1.5", "negative": "[-1.0, 2.0]"}

#: the pipeline's rows and their control: the SSD stage on a 4 GiB drive (the full-size drive's sampled steady
#: state takes seconds, and a control only has to show that the rest of the command line is good)
PRUN = ["run", "--preset", "tiny", "--steps", "2", "--no-fio", "--no-thesis", "--ssd-capacity", "4GiB",
        "-o", OUT + "/p"]
#: the sweep's rows and their control: each control starts a Dask cluster, and its point is replayed on a 4 GiB
#: drive ({small_drive}) for the same reason; --device is repeatable, so a --device row adds its bad one beside it
SWEEP_CONTROL = ["sweep", "--preset", "tiny", "--steps", "2", "--memory-fraction", "0.5", "--workers", "1",
                 "--device", "{small_drive}", "-o", OUT + "/sw"]


def _trace_files():
    """File-argument classes: (id, placeholder) for a path that is not a good input of the wanted kind."""
    return [("missing", "{base}/no-such.parquet"), ("folder", "{folder}"), ("plain-parquet", "{plain}"),
            ("text", "{text}"), ("empty-file", "{empty}"), ("corrupt-pages", "{corrupt}")]


NUMBER_JUNK = [("word", "abc"), ("empty", "")]
FLOAT_BAD = [("nan", "nan"), ("inf", "inf"), ("-inf", "-inf"), ("huge", "1e30")]
SIZE_BAD = [("word", "abc"), ("empty", ""), ("negative", "-1"), ("nan", "nan"), ("inf", "inf"), ("huge", "1e30"),
            ("unit", "12xyz"), ("hex", "0x10")]


def _rows():
    rows: list[tuple[str, list[str]]] = []

    def add(cls: str, *args):
        rows.append((cls, [str(a) for a in args]))

    # -- presets ---------------------------------------------------------------------------------
    add("preset:unknown", "presets", "nope")
    add("preset:missing-toml", "presets", "{base}/nope.toml")
    add("preset:text-toml", "presets", "{badtoml}")
    for cid, v in SIZE_BAD + [("zero", "0"), ("odd", "3000"), ("huge-int", "99999999999999999999")]:
        add(f"presets --page-bytes {cid}", "presets", "tiny", "--page-bytes", v)
    for key, _text in _SPEC_ROWS:
        add(f"spec:{key}", "presets", "{spec_" + key + "}")

    # -- generate ----------------------------------------------------------------------------------
    gen = ["generate", "--preset", "tiny", "-o", OUT + "/g.access.parquet"]
    for opt, bad in (("--steps", ["abc", "", "-1", "0", "1e12", "99999999999999999999", "nan"]),
                     ("--seed", ["abc", "", "-1", "1e30", "99999999999999999999999"]),
                     ("--first-step", ["abc", "-1", "99999999999999999999", "4294967295"]),
                     ("--alpha", ["abc", "", "0", "-1", "nan", "inf", "1e30", "-inf"]),
                     ("--reuse", ["abc", "-0.5", "1.5", "nan", "inf"]),
                     ("--optimizer", ["bogus", ""]),
                     ("--dedup", ["bogus", ""]),
                     ("--page-bytes", ["abc", "0", "3000", "-1", "nan", "1e30", "1TiB"])):
        for v in bad:
            add(f"generate {opt} {v or 'empty'}", *gen, opt, v)
    add("generate --preset unknown", "generate", "--preset", "nope", "-o", OUT + "/g.parquet")
    add("generate --preset and --spec", "generate", "--preset", "tiny", "--spec", "{spec_dim}", "-o", OUT + "/g.parquet")
    add("generate -o empty", "generate", "--preset", "tiny", "-o", "")
    add("generate -o folder", "generate", "--preset", "tiny", "-o", OUT)
    add("generate --steps absent-folder-parent-is-file", "generate", "--preset", "tiny", "-o", "{text}/x.parquet")
    for key, _ in _SPEC_ROWS:
        add(f"generate --spec {key}", "generate", "--spec", "{spec_" + key + "}", "-o", OUT + "/g.parquet")
    add("generate --spec missing", "generate", "--spec", "{base}/nope.toml", "-o", OUT + "/g.parquet")
    add("generate --spec not-toml", "generate", "--spec", "{badtoml}", "-o", OUT + "/g.parquet")
    add("generate unknown option", *gen, "--bogus", "1")

    # -- train (every row is refused before torch is needed or a step runs) -----------------------------
    train = ["train", "--preset", "tiny", "--steps", "1"]  # the control need not train the preset's 50 steps
    for opt, bad in (("--steps", ["abc", "", "-1", "0", "1e12", "99999999999999999999", "nan"]),
                     ("--seed", ["abc", "", "-1", "1e30", "99999999999999999999999"]),
                     ("--threads", ["abc", "", "0", "-2", "1e9", "99999999999999999999"])):
        for v in bad:
            add(f"train {opt} {v or 'empty'}", *train, opt, v)
    add("train --preset unknown", "train", "--preset", "nope", "--steps", "1")
    add("train --preset and --spec", *train, "--spec", "{spec_dim}")
    for key, _ in _SPEC_ROWS:
        add(f"train --spec {key}", "train", "--spec", "{spec_" + key + "}", "--steps", "1")
    add("train unknown option", *train, "--bogus", "1")

    # -- inspect -----------------------------------------------------------------------------------
    for cid, p in _trace_files():
        if cid != "corrupt-pages":  # inspect reads the metadata only
            add(f"inspect {cid}", "inspect", p)
    for v in ("-1", "abc", "", "nan", "99999999999999999999"):
        add(f"inspect --top {v or 'empty'}", "inspect", "{access}", "--top", v)

    # -- emulate -----------------------------------------------------------------------------------
    emu = ["emulate", "{access}", "-o", OUT + "/s.swapio.parquet"]
    emf = [*emu, "--memory-fraction", "0.5"]
    for cid, p in [*_trace_files(), ("swapio-kind", "{stream}")]:
        add(f"emulate trace {cid}", "emulate", p, "-o", OUT + "/s.parquet", "--memory-fraction", "0.5")
    for cid, v in SIZE_BAD + [("zero", "0"), ("above-footprint", "1TiB")]:
        add(f"emulate --memory {cid}", *emu, "--memory", v)
    for v in ("abc", "", "0", "-0.5", "1.5", "nan", "inf", "1e30"):
        add(f"emulate --memory-fraction {v or 'empty'}", *emu, "--memory-fraction", v)
    add("emulate both budgets", *emu, "--memory", "1MiB", "--memory-fraction", "0.5")
    add("emulate no budget", *emu)
    for opt, bad in (("--policy", ["bogus", ""]), ("--readahead", ["bogus", ""]),
                     ("--initial-state", ["bogus"]), ("--writeback-completes", ["bogus"]),
                     ("--profile", ["bogus", "{base}/nope.toml", "{badtoml}"]),
                     ("--page-cluster", ["abc", "-1", "11", "99999999999999999999"]),
                     ("--cluster-slots", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--swap-bytes", ["abc", "", "-1", "4096", "nan", "1e30"]),
                     ("--max-request", ["abc", "0", "100", "-1", "nan", "1e30"]),
                     ("--step-us", ["abc", "0", "-1", "nan", "inf", "1e300"]),
                     ("--reclaim-batch", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--writeback-lag", ["abc", "-1", "99999999999999999999"]),
                     ("--stats-flush-steps", ["abc", "-1", "99999999999999999999"]),
                     ("--write-cost", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--fill-write-credit", ["abc", "-1", "99999999999999999999"])):
        for v in bad:
            add(f"emulate {opt} {v or 'empty'}", *emf, opt, v)
    add("emulate -o folder", "emulate", "{access}", "-o", OUT, "--memory-fraction", "0.5")
    add("emulate -o exists", "emulate", "{access}", "-o", "{stream}", "--memory-fraction", "0.5")

    # -- mrc -----------------------------------------------------------------------------------------
    mrc = ["mrc", "{access}", "-o", OUT + "/m.csv"]
    for cid, p in [*_trace_files(), ("swapio-kind", "{stream}")]:
        add(f"mrc trace {cid}", "mrc", p, "-o", OUT + "/m.csv")
    for opt, bad in (("--sample-rate", ["abc", "", "0", "-1", "1.5", "nan", "inf", "1e30"]),
                     ("--sample-pages", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--points", ["abc", "-1", "99999999999999999999"]),
                     ("--budget", ["abc", "", "0", "-1", "nan", "1e30"]),
                     ("--plot", [OUT + "/x.xyz", OUT + "/x", OUT, OUT + "/x.PNGX"])):
        for v in bad:  # the budget is marked on the plot: given with one (without, it is refused as unread)
            plot = ["--plot", OUT + "/m.png"] if opt == "--budget" else []
            add(f"mrc {opt} {v.replace(OUT, 'OUT') or 'empty'}", *mrc, *plot, opt, v)
    add("mrc both samplings", *mrc, "--sample-rate", "0.1", "--sample-pages", "100")
    add("mrc -o exists", "mrc", "{access}", "-o", "{iolog}")

    # -- export --------------------------------------------------------------------------------------
    for cid, p in [*_trace_files(), ("swapio-kind", "{stream}")]:
        for fmt in ("libcachesim", "csv"):
            add(f"export {fmt} {cid}", "export", p, "--format", fmt, "-o", OUT + "/e.bin")
    add("export --format bogus", "export", "{access}", "--format", "bogus", "-o", OUT + "/e.bin")
    add("export -o missing", "export", "{access}")
    add("export -o folder", "export", "{access}", "-o", OUT)

    # -- compare -------------------------------------------------------------------------------------
    for cid, p in [*_trace_files(), ("access-kind", "{access}")]:
        add(f"compare a {cid}", "compare", p, "{stream}")
        add(f"compare b {cid}", "compare", "{stream}", p)
    for opt in ("--tolerance", "--ks-tolerance"):
        for v in ("abc", "", "-1", "nan", "inf", "-inf"):
            add(f"compare {opt} {v or 'empty'}", "compare", "{stream}", "{stream}", opt, v)
    add("compare --plot x.xyz", "compare", "{stream}", "{stream}", "--plot", OUT + "/c.xyz")
    add("compare --plot no-suffix", "compare", "{stream}", "{stream}", "--plot", OUT + "/c")

    # -- ssd -----------------------------------------------------------------------------------------
    # nvme-tlc at 4 GiB: the smallest size at which the device has room for GC (the default device at 64 MiB
    # has none, and every row failed on that before reaching its option)
    synth = ["ssd", "synth", "--device", "nvme-tlc", "--pattern", "randwrite", "--volume", "0.01x", "--capacity",
             "4GiB", "--no-timing", "-o", OUT + "/t.parquet"]
    replay = ["ssd", "replay", "{stream}", "--device", "nvme-tlc", "--capacity", "4GiB", "-o", OUT + "/t.parquet"]
    # a small drive and 0.1 drive writes: the control runs the whole study in seconds
    thesis = ["ssd", "thesis", "--device", "nvme-tlc", "--capacity", "4GiB", "--drive-writes", "0.1",
              "-o", OUT + "/t.json"]
    device_bad = (("--device", ["bogus", "{base}/nope.toml", "{badtoml}", ""]),
                  ("--capacity", ["abc", "0", "-1", "nan", "1e30", "1EiB"]),
                  ("--op", ["abc", "0", "-1", "nan", "inf", "1e30"]),
                  ("--spare-factor", ["abc", "0", "1", "-1", "nan", "inf"]),
                  ("--channels", ["abc", "0", "-1", "99999999999999999999"]),
                  ("--dies-per-channel", ["0", "-1", "99999999999999999999"]),
                  ("--planes", ["0", "-1", "99999999999999999999"]),
                  ("--blocks-per-plane", ["0", "-1", "99999999999999999999"]),
                  ("--pages-per-block", ["0", "-1", "99999999999999999999"]),
                  ("--page-size", ["abc", "0", "-1", "3000", "1e30"]),
                  ("--read-us", ["abc", "-1", "nan", "inf"]),
                  ("--program-us", ["-1", "nan", "inf"]),
                  ("--erase-us", ["-1", "nan", "inf"]),
                  ("--channel-mb-s", ["0", "-1", "nan", "inf"]),
                  ("--host-mb-s", ["0", "-1", "nan", "inf"]),
                  ("--gc", ["bogus", ""]),
                  ("--gc-free", ["-1", "1", "nan", "inf"]),
                  ("--bg-gc-free", ["-1", "1", "nan", "inf"]),
                  ("--write-buffer", ["abc", "-1", "nan", "1e30"]))
    for opt, bad in device_bad:
        for v in bad:
            add(f"ssd synth {opt} {v or 'empty'}", *synth, opt, v)
    for opt, bad in device_bad[:4]:
        for v in bad:
            add(f"ssd replay {opt} {v or 'empty'}", *replay, opt, v)
            add(f"ssd thesis {opt} {v or 'empty'}", *thesis, opt, v)
    add("ssd synth --op and --spare-factor", *synth, "--op", "0.1", "--spare-factor", "0.1")
    for opt, bad in (("--pattern", ["bogus", ""]), ("--bs", ["abc", "0", "-1", "100", "nan", "1e30", "1TiB"]),
                     ("--volume", ["abc", "nanx", "infx", "1e30x", "0x", "-1x", "0", "-1", "x", "1e30"]),
                     ("--iodepth", ["abc", "-1", "99999999999999999999"]),
                     ("--precondition", ["bogus"]),
                     ("--rwmix-read", ["abc", "-1", "101", "nan", "inf"]),
                     ("--hot-writes", ["-1", "0", "1", "2", "nan"]),
                     ("--hot-fraction", ["-1", "0", "1", "2", "nan"]),
                     ("--window", ["abc", "0", "-1", "nan", "1e30"]),
                     ("--seed", ["abc", "-1", "99999999999999999999"])):
        # the pattern that reads the option (another pattern refuses it as unread)
        pattern = {"--rwmix-read": "randrw", "--hot-writes": "hotcold", "--hot-fraction": "hotcold"}.get(opt)
        args = [("randwrite" if pattern is None else pattern) if a == "randwrite" else a for a in synth]
        for v in bad:
            add(f"ssd synth {opt} {v or 'empty'}", *args, opt, v)
    for cid, p in [*_trace_files(), ("access-kind", "{access}")]:
        add(f"ssd replay stream {cid}", "ssd", "replay", p, "--device", "nvme-tlc", "--capacity", "4GiB", "-o",
            OUT + "/t.parquet")
    for opt, bad in (("--iodepth", ["abc", "-1", "0", "99999999999999999999"]),
                     ("--precondition", ["bogus"]), ("--fit", ["bogus", ""]),
                     ("--window", ["abc", "0", "-1", "nan"]), ("--seed", ["-1", "99999999999999999999"])):
        for v in bad:
            add(f"ssd replay {opt} {v or 'empty'}", *replay, opt, v)
    add("ssd replay too small a device", "ssd", "replay", "{stream}", "--capacity", "1MiB", "-o", OUT + "/t.parquet")
    for opt, bad in (("--drive-writes", ["abc", "", "0", "-1", "nan", "inf", "1e30"]),
                     ("--iodepth", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--write-iodepth", ["0", "-1", "99999999999999999999"]),
                     ("--seed", ["-1", "99999999999999999999"])):
        for v in bad:
            add(f"ssd thesis {opt} {v or 'empty'}", *thesis, opt, v)
    add("ssd unknown subcommand", "ssd", "bogus")

    # -- fio -----------------------------------------------------------------------------------------
    jobs = ["fio", "jobs", "{stream}", "-o", OUT + "/jobs"]
    for cid, p in [*_trace_files(), ("access-kind", "{access}")]:
        add(f"fio jobs stream {cid}", "fio", "jobs", p, "-o", OUT + "/jobs")
    for opt, bad in (("--size", ["abc", "", "0", "-1", "nan", "1e30", "100"]),
                     ("--max-requests", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--ioengine", ["bogus", "", "psync;rm", "libaio extra"]),
                     ("--iodepth", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--sweep", ["", ",", "abc", "0", "100", "4k,,-1", "1e30"])):
        for v in bad:
            add(f"fio jobs {opt} {v or 'empty'}", *jobs, opt, v)
    add("fio jobs -o a file", "fio", "jobs", "{stream}", "-o", "{iolog}")
    run = ["fio", "run", "{jobs}", "--target", OUT + "/target.dat", "--size", "8MiB", "--runtime", "1",
           "-o", OUT + "/run"]
    for opt, bad in (("--size", ["abc", "0", "-1", "nan", "1e30", "4k"]),
                     ("--runtime", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--jobs", ["", ",", "bogus", "seqwrite,bogus"]),
                     ("--target", ["", OUT, "/dev/null", "{base}/no-folder/t.dat"]),
                     ("--fio", ["{base}/no-such-fio"])):
        for v in bad:
            add(f"fio run {opt} {v.replace(OUT, 'OUT') or 'empty'}", *run, opt, v)
    for cid, p in (("missing", "{base}/nope"), ("file", "{iolog}"), ("not-jobs", "{folder}")):
        add(f"fio run jobs-dir {cid}", "fio", "run", p, "--target", OUT + "/target.dat", "-o", OUT + "/run")
        add(f"fio results {cid}", "fio", "results", p)
        add(f"fio compare {cid}", "fio", "compare", p)
    imp = ["fio", "import", "{iolog}", "-o", OUT + "/i.swapio.parquet"]
    for key in _IOLOG_ROWS:
        add(f"fio import log {key}", "fio", "import", "{iolog_" + key + "}", "-o", OUT + "/i.swapio.parquet")
    for cid, p in (("missing", "{base}/nope.log"), ("folder", "{folder}"), ("parquet", "{access}"),
                   ("empty-file", "{empty}")):
        add(f"fio import log {cid}", "fio", "import", p, "-o", OUT + "/i.swapio.parquet")
    for opt, bad in (("--page-bytes", ["abc", "0", "-1", "3000", "99999999999999999999"]),
                     ("--device-size", ["abc", "0", "-1", "nan", "1e30", "4k"]),
                     ("--file", ["/dev/other"])):
        for v in bad:
            add(f"fio import {opt} {v}", *imp, opt, v)
    add("fio compare --model missing", "fio", "compare", "{run_dir}", "--model", "{base}/nope.json")

    # -- run -----------------------------------------------------------------------------------------
    prun = PRUN
    for opt, bad in (("--preset", ["bogus", "{base}/nope.toml", "{spec_dim}"]),
                     ("--steps", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--seed", ["abc", "-1", "99999999999999999999"]),
                     ("--memory", ["abc", "0", "-1", "nan", "1e30", "1TiB", ""]),
                     ("--memory-fraction", ["abc", "0", "-1", "2", "nan", "inf"]),
                     ("--policy", ["bogus", ""]), ("--readahead", ["bogus", ""]),
                     ("--device", ["bogus", "{badtoml}"]),
                     ("--ssd-capacity", ["abc", "0", "-1", "nan", "1e30"]),
                     ("--fio-size", ["abc", "0", "-1", "nan"]),
                     ("--fio-runtime", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--runtime", ["bogus", "{base}/nope.toml", "{text}", "{plain}"])):
        # the fio options go without --no-fio (with it they are refused as unread)
        base = [a for a in prun if a != "--no-fio"] if opt.startswith("--fio-") else prun
        for v in bad:
            add(f"run {opt} {v or 'empty'}", *base, opt, v)
    add("run both budgets", *prun, "--memory", "1MiB", "--memory-fraction", "0.5")
    add("run --designs with --runtime", *prun, "--runtime", "pytorch-cpu", "--designs")
    add("run -o a file", *prun[:-2], "-o", "{iolog}")

    # -- report --------------------------------------------------------------------------------------
    add("report missing folder", "report", "{base}/nope")
    add("report a file", "report", "{iolog}")
    add("report -o the input folder", "report", "{base}", "-o", "{base}")
    add("report -o a parent of the input", "report", "{base}", "-o", "{base}/..")
    add("report -o a folder of other files", "report", "{base}", "-o", "{folder_full}")
    add("report -o a file", "report", "{base}", "-o", "{iolog}")

    # -- capture (refused before anything is set up) -------------------------------------------------
    cap = ["capture", "{access}", "-o", OUT + "/k.swapio.parquet", "--memory-fraction", "0.5"]
    add("capture no trace", "capture")
    for cid, p in (("missing", "{base}/nope.parquet"), ("folder", "{folder}"), ("swapio-kind", "{stream}")):
        add(f"capture trace {cid}", "capture", p, "-o", OUT + "/k.parquet", "--memory", "1MiB")
    for v in ("abc", "-1", "nan", "0"):
        add(f"capture --memory {v}", "capture", "{access}", "-o", OUT + "/k.parquet", "--memory", v)
    for opt, bad in (("--memory-fraction", ["abc", "nan", "inf", "0", "2"]),
                     ("--compute", ["bogus"]), ("--swap-size", ["abc", "-1", "nan"]),
                     ("--buffer-size", ["abc", "-1", "0", "nan"]), ("--timeout", ["abc", "0", "-1", "nan"])):
        for v in bad:
            add(f"capture {opt} {v}", *cap, opt, v)

    # -- generate: row layout and Dask options (refused before any cluster starts) -----------------
    for opt, bad in (("--row-layout", ["bogus", ""]),
                     ("--workers", ["abc", "", "0", "-1", "nan", "99999999999999999999"]),
                     ("--parts", ["abc", "", "0", "-1", "nan", "99999999999999999999"]),
                     ("--scheduler", ["", "bogus", "tcp://", "tcp://host:notaport", "tcp://host:99999"])):
        for v in bad:
            add(f"generate {opt} {v or 'empty'}", *gen, opt, v)
    add("generate --parts without --workers", *gen, "--parts", "4")
    add("generate --row-layout packed --scatter", *gen, "--row-layout", "packed", "--scatter")
    add("generate --workers and --scheduler", *gen, "--workers", "2", "--scheduler", "tcp://127.0.0.1:1")

    # -- designs -------------------------------------------------------------------------------------
    des = ["designs", "{access}", "-o", OUT + "/d", "--memory-fraction", "0.5", "--device", "none"]
    for cid, p in [*_trace_files(), ("swapio-kind", "{stream}")]:
        add(f"designs trace {cid}", "designs", p, "-o", OUT + "/d", "--memory-fraction", "0.5", "--device", "none")
        if cid != "corrupt-pages":  # found after the Linux run, whose progress line precedes the error
            add(f"designs --packed {cid}", *des, "--packed", p)
    add("designs no budget", "designs", "{access}", "-o", OUT + "/d", "--device", "none")
    add("designs both budgets", *des, "--memory", "1MiB")
    for cid, v in SIZE_BAD + [("zero", "0"), ("above-footprint", "1TiB")]:
        add(f"designs --memory {cid}", "designs", "{access}", "-o", OUT + "/d", "--device", "none", "--memory", v)
    for opt, bad in (("--memory-fraction", ["abc", "", "0", "-1", "2", "nan", "inf"]),
                     ("--device", ["bogus", "", "{base}/nope.toml", "{badtoml}"]),
                     ("--segment-size", ["abc", "", "0", "-1", "nan", "1e30", "1000"]),
                     ("--victim", ["bogus", ""]),
                     ("--spare", ["abc", "", "-1", "nan", "inf", "1e30", "11"]),  # 0 is a log with no room
                     ("--swapin", ["bogus", ""]),
                     ("--prefetch-window", ["abc", "", "0", "-1", "nan", "1e30", "1000"]),
                     ("--zone-size", ["abc", "", "0", "-1", "nan", "1e30", "1000"]),
                     ("--zone-capacity", ["abc", "0", "-1", "nan", "1e30", "1GiB"]),
                     ("--max-open-zones", ["abc", "", "0", "-1", "nan", "99999999999999999999"]),
                     ("--fio-target", ["", OUT, "/dev/null", "{base}/no-folder/t.dat"]),
                     ("--fio-size", ["abc", "", "0", "-1", "nan", "1e30"]),
                     ("--fio-runtime", ["abc", "0", "-1", "nan", "99999999999999999999"]),
                     ("--fio-requests", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--fio-repeats", ["abc", "0", "-1", "99999999999999999999"])):
        # the fio options go with --fio-target (without it they are refused as unread)
        target = ["--fio-target", OUT + "/f.dat"] if opt.startswith("--fio-") and opt != "--fio-target" else []
        for v in bad:
            add(f"designs {opt} {v.replace(OUT, 'OUT') or 'empty'}", *des, *target, opt, v)
    add("designs -o a file", *des, "-o", "{iolog}")
    add("designs -o a folder of other files", *des, "-o", "{folder_full}")

    # -- time ----------------------------------------------------------------------------------------
    tim = ["time", "{stream}", "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", "1",
           "--reclaim-cpu-us", "1", "-o", OUT + "/t.parquet"]
    for cid, p in [*_trace_files(), ("access-kind", "{access}")]:
        add(f"time stream {cid}", "time", p, "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", "1",
            "--reclaim-cpu-us", "1")
    for cid, p in (("missing", "{base}/no-such.parquet"), ("folder", "{folder}"), ("text", "{text}"),
                   ("swapio-kind", "{stream}")):
        add(f"time --trace {cid}", *tim[:5], "mlp", *tim[6:], "--trace", p)
        add(f"time --compute-baseline {cid}", *tim, "--compute-baseline", p)
    add("time no device", "time", "{stream}", "--compute", "none")
    for opt, bad in (("--device", ["bogus", "", "{base}/nope.toml", "{badtoml}", "{folder}", "{kprofile_ok}",
                                   "{devprof_nan}", "{devprof_negative}", "{devprof_ragged}", "{devprof_empty}"]),
                     ("--compute", ["bogus", ""]),
                     ("--step-compute-us", ["abc", "", "-1", "nan", "inf", "1e300"]),
                     ("--fault-cpu-us", ["abc", "", "-1", "nan", "inf", "1e300"]),
                     ("--reclaim-cpu-us", ["abc", "", "-1", "nan", "inf", "1e300"]),
                     ("--write-cpu-us", ["abc", "", "-1", "nan", "inf", "1e300"])):
        for v in bad:
            add(f"time {opt} {v or 'empty'}", *tim, opt, v)
    for v in ("abc", "", "0", "-1", "21", "2.5"):  # out of its range, or not a whole count
        add(f"time --fault-overhead-runs {v or 'empty'}", *tim, "--fault-overhead-runs", v)
    add("time --fault-overhead-runs without --measure-fault-overhead", *tim, "--fault-overhead-runs", "2")
    for name in COSTS_SPREADS:  # a host-costs file whose fault cost's spread is malformed or leaves the cost out
        add(f"costs toml fault_cpu_us_range {name}: time", "time", "{stream}", "--device", "nvme-tlc", "--compute",
            "none", "--costs", "{dmg_costs_range_" + name + "}")
    add("time both compute sources", *tim, "--step-compute-us", "10", "--compute-baseline", "{stream}")
    add("time -o folder", *tim, "-o", OUT)
    add("time -o exists", *tim, "-o", "{iolog}")
    add("time -o empty", *tim, "-o", "")

    # -- fio profile ---------------------------------------------------------------------------------
    for cid, p in (("missing", "{base}/nope"), ("file", "{iolog}"), ("not-a-run", "{folder}"),
                   ("jobs-not-run", "{jobs}")):
        add(f"fio profile run-dir {cid}", "fio", "profile", p, "-o", OUT + "/p.toml")
    add("fio profile -o missing", "fio", "profile", "{folder}")
    add("fio profile -o folder", "fio", "profile", "{folder}", "-o", OUT)

    # -- sweep (refused before any Dask cluster starts) ----------------------------------------------
    swp = SWEEP_CONTROL
    for cid, p in (("missing", "{base}/nope.toml"), ("folder", "{folder}"), ("not-toml", "{badtoml}"),
                   ("unknown-key", "{sweep_unknown}"), ("bad-fraction", "{sweep_fraction}"),
                   ("bad-steps", "{sweep_steps}"), ("bad-memory", "{sweep_memory}"), ("wrong-type", "{sweep_type}")):
        add(f"sweep file {cid}", "sweep", p, "--workers", "1", "-o", OUT + "/sw")
    # damaged data pages are found by the point's task on a worker: a failed point, not a bad input
    for cid, p in [*_trace_files()[:-1], ("swapio-kind", "{stream}")]:
        add(f"sweep --trace {cid}", "sweep", "--trace", p, "--memory-fraction", "0.5", "--workers", "1",
            "--device", "{small_drive}", "-o", OUT + "/sw")
    add("sweep nothing to sweep", "sweep", "--memory-fraction", "0.5", "-o", OUT + "/sw")
    add("sweep no budget", "sweep", "--preset", "tiny", "-o", OUT + "/sw")
    add("sweep no -o", "sweep", "--preset", "tiny", "--memory-fraction", "0.5")
    add("sweep -o a file", *swp, "-o", "{iolog}")
    add("sweep -o empty", *swp, "-o", "")
    for opt, bad in (("--preset", ["bogus", "{base}/nope.toml", "{spec_dim}"]),
                     ("--steps", ["abc", "", "0", "-1", "nan", "99999999999999999999"]),
                     ("--seed", ["abc", "", "-1", "nan", "99999999999999999999999"]),
                     ("--memory", ["abc", "", "0", "-1", "nan", "inf", "1e30", "12xyz"]),
                     ("--memory-fraction", ["abc", "", "0", "-1", "2", "nan", "inf"]),
                     ("--policy", ["bogus", ""]),
                     ("--device", ["bogus", "", "{badtoml}"]),
                     ("--workers", ["abc", "", "0", "-1", "nan", "99999999999999999999"]),
                     ("--scheduler", ["", "bogus", "tcp://", "tcp://host:notaport", "tcp://host:99999"]),
                     ("--plot", [OUT + "/s.xyz", OUT + "/s", OUT])):
        for v in bad:
            add(f"sweep {opt} {v.replace(OUT, 'OUT') or 'empty'}", *swp, opt, v)
    add("sweep --workers and --scheduler", *swp, "--scheduler", "tcp://127.0.0.1:1")

    # -- run: the new stages -------------------------------------------------------------------------
    add("run --fio-profile with --no-fio", *prun, "--fio-profile")
    add("run --designs with --policy bogus", *prun, "--designs", "--policy", "bogus")
    add("run --designs with --device bogus", *prun, "--designs", "--device", "bogus")
    add("run --designs with --memory 1TiB", *prun, "--designs", "--memory", "1TiB")

    # -- ssd: the drive's background and the swap partition ------------------------------------------
    steady = ["--precondition", "steady"]
    background_bad = (("--fill", ["abc", "", "-1", "1.5", "nan", "inf"]),
                      ("--overwritten", ["abc", "", "-1", "1.5", "nan", "inf"]),
                      ("--swap-prior", ["bogus", ""]),
                      ("--swap-offset", ["abc", "", "-1", "nan", "1e30", "2EiB", "100", "8GiB"]))
    for opt, bad in background_bad:
        for v in bad:
            add(f"ssd synth steady {opt} {v or 'empty'}", *synth, *steady, opt, v)
            add(f"ssd replay steady {opt} {v or 'empty'}", *replay, *steady, opt, v)
    for v in ("abc", "", "0", "-1", "nan", "1e30", "8GiB", "100"):
        add(f"ssd synth --swap-size {v or 'empty'}", *synth, *steady, "--swap-size", v)
    add("ssd synth --swap-offset + --swap-size past the drive", *synth, "--swap-offset", "3GiB",
        "--swap-size", "2GiB")
    real = [a for a in thesis if a not in ("--drive-writes", "0.1")] + ["--real", "--swap-size", "1GiB"]
    for opt, bad in (("--fill", ["abc", "", "-1", "1.5", "nan", "inf"]),
                     ("--overwritten", ["abc", "", "-1", "1.5", "nan", "inf"]),
                     ("--swap-size", ["abc", "", "0", "-1", "nan", "1e30", "8GiB", "100"])):
        for v in bad:
            add(f"ssd thesis --real {opt} {v or 'empty'}", *real, opt, v)
    add("ssd thesis --sensitivity without --real", *thesis, "--sensitivity")
    for opt, v in (("--fill", "0.5"), ("--overwritten", "0.5"), ("--swap-size", "lots")):  # read only with --real
        add(f"ssd thesis {opt} without --real", *thesis, opt, v)
    add("ssd thesis --real --device bogus", *real, "--device", "bogus")

    # -- export --format mqsim -----------------------------------------------------------------------
    mq = ["export", "{stream}", "--format", "mqsim", "-o", OUT + "/e.trace"]
    for cid, p in [*_trace_files(), ("access-kind", "{access}")]:
        add(f"export mqsim {cid}", "export", p, "--format", "mqsim", "-o", OUT + "/e.trace")
    for v in ("abc", "", "-1", "nan", "inf", "1e30", "2EiB", "100", "12xyz"):
        add(f"export mqsim --swap-offset {v or 'empty'}", *mq, "--swap-offset", v)
    add("export mqsim -o folder", "export", "{stream}", "--format", "mqsim", "-o", OUT)
    add("export mqsim -o exists", "export", "{stream}", "--format", "mqsim", "-o", "{iolog}")

    # -- emulate --profile: names and files ----------------------------------------------------------
    for cid, p in (("empty", ""), ("folder", "{folder}"), ("folder-slash", "{folder}/"), ("text", "{text}"),
                   *((f"toml-{key}", "{kprofile_" + key + "}") for key in _KPROFILE_ROWS)):
        add(f"emulate --profile {cid}", *emf, "--profile", p)

    # -- damaged files from tests/damaged.py, given to every reader of their kind ---------------------
    access_readers = {"emulate": ["emulate", "{X}", "-o", OUT + "/s.parquet", "--memory-fraction", "0.5"],
                      "mrc": ["mrc", "{X}", "-o", OUT + "/m.csv"],
                      "export csv": ["export", "{X}", "--format", "csv", "-o", OUT + "/e.csv"],
                      "designs": ["designs", "{X}", "-o", OUT + "/d", "--memory-fraction", "0.5", "--device", "none"],
                      "designs --packed": [*des, "--packed", "{X}"],
                      "inspect": ["inspect", "{X}"]}
    stream_readers = {"compare a": ["compare", "{X}", "{stream}"], "compare b": ["compare", "{stream}", "{X}"],
                      "ssd replay": ["ssd", "replay", "{X}", "--device", "nvme-tlc", "--capacity", "4GiB",
                                     "-o", OUT + "/t.parquet"],
                      "fio jobs": ["fio", "jobs", "{X}", "-o", OUT + "/jobs", "--sweep", "4k", "--max-requests", "100"],
                      "time": ["time", "{X}", *tim[2:]],
                      "export mqsim": ["export", "{X}", "--format", "mqsim", "-o", OUT + "/e.trace"]}
    for kind, readers in (("access", access_readers), ("swapio", stream_readers)):
        for name in parquet_variants(kind):
            for cmd, argv in readers.items():
                if (kind, name, cmd) in _READ_LATER:
                    continue
                add(f"damaged {kind} {name}: {cmd}", *[a.replace("{X}", "{dmg_" + kind + "_" + name + "}")
                                                       for a in argv])
    for name in dataset_variants():
        for cmd in ("emulate", "mrc", "export csv", "inspect", "designs"):
            add(f"damaged dataset {name}: {cmd}", *[a.replace("{X}", "{dmg_dataset_" + name + "}")
                                                    for a in access_readers[cmd]])
    for name in ("cut-short", "binary", "numbers-as-strings", "numbers-1e400", "numbers-1e300", "numbers-true",
                 "numbers-negative"):
        add(f"damaged device toml {name}: ssd synth", *synth, "--device", "{dmg_device_" + name + "}")
        add(f"damaged device toml {name}: time", *tim, "--device", "{dmg_device_" + name + "}")
        add(f"damaged costs toml {name}: time", "time", "{stream}", "--device", "nvme-tlc", "--compute", "none",
            "--costs", "{dmg_costs_" + name + "}")
    add("device toml op = 1000: ssd synth", *synth, "--device", "{device_op1000}")
    add("device toml op = 1000: time", *tim, "--device", "{device_op1000}")

    # -- issue 30's full-size hostile pass: the readers it found failing --------------------------------
    # a fio job folder whose manifest.json is damaged, of the wrong shape, not a file, or names a job file
    # outside the folder (fio run --dry-run reads and checks it whole)
    for name in _MANIFEST_ROWS:
        add(f"fio run manifest {name}", "fio", "run", "{dmg_jobs_" + name + "}", "--target", OUT + "/target.dat",
            "-o", OUT + "/run")
    add("fio jobs -o a folder whose manifest.json is a FIFO --force", *jobs, "-o", "{jobs_fifo_manifest}", "--force")
    # a `fio run` folder whose results.parquet holds damaged values or metadata
    for name in fio_results_variants():
        for cmd, argv in (("fio results", ["fio", "results", "{X}"]), ("fio compare", ["fio", "compare", "{X}"]),
                          ("fio profile", ["fio", "profile", "{X}", "-o", OUT + "/p.toml"])):
            if (name, cmd) not in _RESULTS_VALID:
                add(f"damaged fio-run results-{name}: {cmd}",
                    *[a.replace("{X}", "{dmg_fiorun_results-" + name + "}") for a in argv])
    # a `capture -- swaptrace train` stream whose kernel readings or command line are damaged
    for name in capture_variants():
        if name.startswith(("replay-us", "compute-us")):  # the baseline's step times: read by time, not here
            add(f"damaged capture {name}: time --compute-baseline", *tim[:5], "mlp", *tim[6:], "--compute-baseline",
                "{dmg_capture_" + name + "}")
        else:
            add(f"damaged capture {name}: runtime-profile", "runtime-profile", "{dmg_capture_" + name + "}",
                "-o", OUT + "/r.toml")
    # a process trace (generate --runtime) whose runtime section is damaged
    for name in process_variants():
        if name not in ("step-offset-text", "startup-step-negative"):  # not read by the emulator (it numbers steps
            # from the trace's own rows); inspect shows them
            add(f"damaged process {name}: emulate", "emulate", "{dmg_process_" + name + "}", "-o",
                OUT + "/s.parquet", "--memory-fraction", "0.5")

    # -- inputs that must agree ----------------------------------------------------------------------
    add("time --trace of another trace", *tim[:5], "mlp", *tim[6:], "--trace", "{other_access}")
    add("designs --packed of another model", *des, "--packed", "{other_access}")
    add("compare streams of different page sizes", "compare", "{stream}", "{stream_2m}")

    # -- sizes checked before they are allocated -----------------------------------------------------
    add("designs --segment-size 1TiB", *des, "--segment-size", "1TiB")
    add("generate a spec of 6 EiB", "generate", "--spec", "{spec_huge}", "--steps", "1", "-o", OUT + "/g.parquet")

    # -- FIFOs given as inputs (refused, never read: a read would block) -----------------------------
    for cmd, argv in (("inspect", ["inspect", "{fifo}"]), ("emulate", access_readers["emulate"]),
                      ("compare", stream_readers["compare a"])):
        add(f"fifo: {cmd}", *[a.replace("{X}", "{fifo}") for a in argv])
    add("fifo: generate --spec", "generate", "--spec", "{fifo_toml}", "-o", OUT + "/g.parquet")
    add("fifo: ssd --device", *synth, "--device", "{fifo_toml}")
    add("fifo: emulate --profile", *emf, "--profile", "{fifo_toml}")
    add("fifo: fio import", "fio", "import", "{fifo_log}", "-o", OUT + "/i.swapio.parquet")
    add("fifo: sweep file", "sweep", "{fifo_toml}", "--workers", "1", "-o", OUT + "/sw")

    # -- the output rule: inputs are never outputs, outputs never share a path, folders not ours -----
    add("mrc -o its own trace", "mrc", "{access}", "-o", "{access}", "--force")
    add("emulate -o its own trace", "emulate", "{access}", "-o", "{access}", "--force", "--memory-fraction", "0.5")
    add("export -o its own trace", "export", "{access}", "--format", "csv", "-o", "{access}", "--force")
    add("mrc -o inside its dataset", "mrc", "{dataset}", "-o", "{dataset}/m.csv")
    add("time -o and --save-costs one path", *tim, "-o", OUT + "/x", "--save-costs", OUT + "/x")
    add("time --save-costs its --costs", "time", "{stream}", "--device", "nvme-tlc", "--compute", "none",
        "--costs", "{costs_ok}", "--save-costs", "{costs_ok}", "--force")
    add("mrc -o and --plot one path", "mrc", "{access}", "-o", OUT + "/m.png", "--plot", OUT + "/m.png")
    add("fio import -o its iolog", "fio", "import", "{iolog}", "-o", "{iolog}", "--force")
    add("fio jobs -o a folder of other files --force", *jobs, "-o", "{folder_full}", "--force")
    add("designs -o a folder of other files --force", *des, "-o", "{folder_full}", "--force")
    add("run -o a folder of other files --force", *prun, "-o", "{folder_full}", "--force")
    add("sweep -o a folder of other files", *swp, "-o", "{folder_full}")
    add("mrc -o a name of 300 bytes", "mrc", "{access}", "-o", OUT + "/" + "n" * 300)

    # -- report --------------------------------------------------------------------------------------
    add("report of an empty folder", "report", "{empty_dir}", "-o", OUT + "/r")

    # -- the group -----------------------------------------------------------------------------------
    add("unknown command", "bogus")
    add("unknown fio subcommand", "fio", "bogus")
    return rows


#: model specs with one bad value each (TOML text appended to a valid one-table spec)
_SPEC_BASE = 'name = "x"\nbatch_size = {batch}\nbottom_mlp = [4, 4]\ntop_mlp = [4]\n\n[[tables]]\nrows = 100\n'
_SPEC_ROWS = [
    ("dim", _SPEC_BASE.format(batch=4) + "dim = 1000000000000\n"),
    ("dim-float", _SPEC_BASE.format(batch=4) + "dim = 1e12\n"),
    ("batch", _SPEC_BASE.format(batch=1000000000000) + "dim = 4\n"),
    ("lookups", _SPEC_BASE.format(batch=4) + "dim = 4\nlookups = 1000000000000\n"),
    ("lookups-values", _SPEC_BASE.format(batch=4) + "dim = 4\nlookups = { values = [1000000000000], probs = [1.0] }\n"),
    ("alpha", _SPEC_BASE.format(batch=4) + "dim = 4\nalpha = 1e30\n"),
    ("alpha-nan", _SPEC_BASE.format(batch=4) + "dim = 4\nalpha = nan\n"),
    ("rows", _SPEC_BASE.format(batch=4).replace("rows = 100", "rows = 0") + "dim = 4\n"),
    ("count", _SPEC_BASE.format(batch=4) + "dim = 4\ncount = 1000000000\n"),
    ("width", _SPEC_BASE.format(batch=4).replace("[4, 4]", "[4, 1000000000000]") + "dim = 4\n"),
    ("lookups-per-step", _SPEC_BASE.format(batch=4000000) + "dim = 4\nlookups = 60000\n"),
    ("dtype", _SPEC_BASE.format(batch=4) + 'dim = 4\ndtype = "float128"\n'),
    ("unknown-key", _SPEC_BASE.format(batch=4) + "dim = 4\nbogus = 1\n"),
    ("distribution", _SPEC_BASE.format(batch=4) + 'dim = 4\ndistribution = "gaussian"\n'),
    ("pooling", _SPEC_BASE.format(batch=4) + 'dim = 4\npooling = "sometimes"\n'),
    ("unique-in-bag", _SPEC_BASE.format(batch=4) + 'dim = 4\nunique_in_bag = "yes"\n'),
    ("pooling-random-distribution", _SPEC_BASE.format(batch=4)
     + 'dim = 4\npooling = "random"\nlookups = { values = [1, 2], probs = [0.5, 0.5] }\n'),
    ("pooling-random-huge", _SPEC_BASE.format(batch=4) + 'dim = 4\npooling = "random"\nlookups = 1000000000000\n'),
    ("model-distribution", _SPEC_BASE.format(batch=4).replace("\n\n[[tables]]", '\ndistribution = 1\n\n[[tables]]')
     + "dim = 4\n"),
    ("no-tables", 'name = "x"\nbatch_size = 4\nbottom_mlp = [4, 4]\ntop_mlp = [4]\n'),
]

#: fio iologs with one problem each
_IOLOG_HEAD = "fio version 2 iolog\n/dev/x add\n/dev/x open\n"
_IOLOG_ROWS = {
    "unknown-op": _IOLOG_HEAD + "/dev/x write 0 4096\n/dev/x frobnicate 0 4096\n",
    "zero-length": _IOLOG_HEAD + "/dev/x write 0 0\n",
    "unaligned-offset": _IOLOG_HEAD + "/dev/x write 100 4096\n",
    "unaligned-length": _IOLOG_HEAD + "/dev/x write 0 1000\n",
    "negative": _IOLOG_HEAD + "/dev/x write -4096 4096\n",
    "not-a-number": _IOLOG_HEAD + "/dev/x write zero 4096\n",
    "no-header": "/dev/x write 0 4096\n",
    "version-9": "fio version 9 iolog\n/dev/x write 0 4096\n",
    "no-requests": _IOLOG_HEAD + "/dev/x close\n",
    "huge": _IOLOG_HEAD + "/dev/x write 99999999999999999999999 4096\n",
    "binary": "fio version 2 iolog\n\x00\x01\x02\xff\n",
}

#: kernel profiles (emulate --profile) with one problem each: the shipped profile with a line replaced
_KPROFILE_SUBS = {
    "ok": ("", ""),
    "no-name": ('name = "linux-6.x-cgroup1"', ""),
    "unknown-key": ('name = "linux-6.x-cgroup1"', 'name = "x"\nbogus = 1'),
    "wrong-type": ("write_cost = 4", 'write_cost = "four"'),
    "float-int": ("write_cost = 4", "write_cost = 4.0"),
    "zero-write-cost": ("write_cost = 4", "write_cost = 0"),
    "negative-write-cost": ("write_cost = 4", "write_cost = -1"),
    "huge-write-cost": ("write_cost = 4", "write_cost = 99999999999"),
    "negative-lag": ("writeback_lag = 640", "writeback_lag = -1"),
    "huge-lag": ("writeback_lag = 640", "writeback_lag = 9999999999999"),
    "negative-credit": ("fill_write_credit = 6", "fill_write_credit = -1"),
    "negative-flush": ("stats_flush_steps = 1", "stats_flush_steps = -1"),
    "bad-completion": ('writeback_completion = "device"', 'writeback_completion = "bogus"'),
    "plug-rules-not-bool": ("plug_rules = false", "plug_rules = 1"),
    "missing-key": ("write_cost = 4", ""),
    "linux-not-table": ("[linux]", "linux = 1\n[nothing]"),
    "ensemble-nan": ("room_offsets = [-0.005, 0.0, 0.005]", "room_offsets = [nan]"),
    "ensemble-empty": ("write_costs = [3, 4, 5, 6, 8]", "write_costs = []"),
    "ensemble-zero": ("write_costs = [3, 4, 5, 6, 8]", "write_costs = [0]"),
    "ensemble-huge": ("write_costs = [3, 4, 5, 6, 8]", "write_costs = [99999999999]"),
    "binary": None,
}
_KPROFILE_ROWS = [k for k in _KPROFILE_SUBS if k != "ok"]

#: measured device profiles (time --device) with one problem each
_DEVPROF = 'kind = "swaptrace-device-profile"\nname = "d"\nsizes_bytes = [4096, 8192]\ndepths = [1]\n'
_DEVPROF_ROWS = {
    "nan": _DEVPROF + "[read]\nlatency_us = [[nan], [90.0]]\n[write]\nlatency_us = [[20.0], [30.0]]\n",
    "negative": _DEVPROF + "[read]\nlatency_us = [[-5.0], [90.0]]\n[write]\nlatency_us = [[20.0], [30.0]]\n",
    "ragged": _DEVPROF + "[read]\nlatency_us = [[80.0]]\n[write]\nlatency_us = [[20.0], [30.0, 1.0]]\n",
    "empty": 'kind = "swaptrace-device-profile"\nname = "d"\nsizes_bytes = []\ndepths = []\n'
             "[read]\nlatency_us = []\n[write]\nlatency_us = []\n",
}

#: sweep TOML files with one problem each
_SWEEP_ROWS = {
    "unknown": 'presets = ["tiny"]\nmemory_fractions = [0.5]\nbogus = 1\n',
    "fraction": 'presets = ["tiny"]\nmemory_fractions = [2.0]\n',
    "steps": 'presets = ["tiny"]\nsteps = -3\nmemory_fractions = [0.5]\n',
    "memory": 'presets = ["tiny"]\nmemory = ["12xyz"]\n',
    "type": 'presets = ["tiny"]\nmemory_fractions = ["half"]\n',
}

#: manifests of a fio job folder with one problem each: (field, value) set on the manifest, ("job", field, value)
#: on its first job, or the whole text
_MANIFEST_ROWS = {
    "not-json": "{\"kind\": \"fio-jobs\", \"jobs\": [",
    "list": "[1, 2]",
    "jobs-text": ("jobs", "all"),
    "jobs-of-numbers": ("jobs", [1, 2]),
    "precondition-text": ("precondition", "yes"),
    "groups-text": ("groups", "all"),
    "min-target-inf": ("min_target_bytes", float("inf")),
    "job-file-escapes": ("job", "file", "../../../etc/passwd"),
    "job-file-number": ("job", "file", 5),
    "job-name-number": ("job", "name", 5),
    "job-group-list": ("job", "group", [1]),
    "job-runtime-factor-huge": ("job", "runtime_factor", 10 ** 30),
    "job-iodepth-text": ("job", "iodepth", "deep"),
    "fifo": None,
}

#: (results variant, reader) pairs left out: the file is valid for that reader (a replay's rows have request
#: size 0; a run with no rows prints an empty table and no ratios)
_RESULTS_VALID = {("request-bytes-zero", "fio results"), ("request-bytes-zero", "fio compare"),
                  ("request-bytes-zero", "fio profile"), ("no-rows", "fio results"), ("no-rows", "fio compare")}

#: (kind, variant, reader) pairs left out: the reader never reads the damaged column or field, so the file is
#: valid input for it (inspect reads the metadata only; compare reads steps, ops and lengths, not times)
_READ_LATER = {("swapio", "t_us-nan", "compare a"), ("swapio", "t_us-nan", "compare b"),
               ("swapio", "t_us-nan", "ssd replay"), ("access", "page-past-footprint", "inspect")}

ROWS = _rows()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_all_inputs(tmp_path_factory.mktemp("bad-inputs"))


def make_all_inputs(base: Path) -> dict[str, Path]:
    """The shared inputs plus this table's own files (specs, iologs, profiles, sweep files) under ``base``."""
    paths = make_inputs(base)
    for key, text in _SPEC_ROWS:
        paths[f"spec_{key}"] = base / f"spec-{key}.toml"
        paths[f"spec_{key}"].write_text(text)
    for key, text in _IOLOG_ROWS.items():
        paths[f"iolog_{key}"] = base / f"{key}.iolog"
        paths[f"iolog_{key}"].write_bytes(text.encode("latin-1"))
    paths["badtoml"] = base / "bad.toml"
    paths["badtoml"].write_text("this is [not toml\n")
    shipped = (Path(__file__).parents[1] / "swaptrace" / "profiles" / "linux-6.x-cgroup1.toml").read_text()
    for key, sub in _KPROFILE_SUBS.items():
        paths[f"kprofile_{key}"] = base / f"kernel-{key}.toml"
        if sub is None:
            paths[f"kprofile_{key}"].write_bytes(b"\x00\xff\xfe binary")
        else:
            assert sub[0] in shipped, sub
            paths[f"kprofile_{key}"].write_text(shipped.replace(sub[0], sub[1], 1))
    for key, text in _DEVPROF_ROWS.items():
        paths[f"devprof_{key}"] = base / f"device-{key}.toml"
        paths[f"devprof_{key}"].write_text(text)
    for key, text in _SWEEP_ROWS.items():
        paths[f"sweep_{key}"] = base / f"sweep-{key}.toml"
        paths[f"sweep_{key}"].write_text(text)
    paths["folder_full"] = base / "other-files"
    paths["folder_full"].mkdir()
    (paths["folder_full"] / "keep.txt").write_text("keep")
    for kind, good in (("access", paths["access"]), ("swapio", paths["stream"])):
        for name, path in damage(kind, good, base / f"damaged-{kind}").items():
            paths[f"dmg_{kind}_{name}"] = path
    paths["small_drive"] = base / "small-drive.toml"  # the sweep's rows (SWEEP_CONTROL)
    paths["small_drive"].write_text('base = "nvme-tlc"\ncapacity = "4GiB"\n')
    paths["device_ok"] = base / "device-ok.toml"
    paths["device_ok"].write_text('base = "nvme-tlc"\nop = 0.28\n')
    for name, path in damage("toml", paths["device_ok"], base / "damaged-device").items():
        paths[f"dmg_device_{name}"] = path
    paths["device_op1000"] = base / "device-op1000.toml"
    paths["device_op1000"].write_text('base = "nvme-tlc"\nop = 1000\n')
    paths["costs_ok"] = base / "costs-ok.toml"
    paths["costs_ok"].write_text('kind = "swaptrace-host-costs"\nfault_cpu_us = 1.5\nreclaim_cpu_us = 0.5\n'
                                 'write_cpu_us = 0.25\n')
    for name, path in damage("toml", paths["costs_ok"], base / "damaged-costs").items():
        paths[f"dmg_costs_{name}"] = path
    for name, spread in COSTS_SPREADS.items():
        paths[f"dmg_costs_range_{name}"] = base / f"costs-range-{name}.toml"
        paths[f"dmg_costs_range_{name}"].write_text(paths["costs_ok"].read_text() + f"fault_cpu_us_range = {spread}\n")
    paths["other_access"] = base / "other.access.parquet"
    assert invoke("generate", "--preset", "tiny", "--steps", 3, "--seed", 5, "-o", paths["other_access"]).exit_code == 0
    paths["fifo"] = base / "fifo.parquet"
    os.mkfifo(paths["fifo"])
    paths["thesis_dir"] = base / "pipeline-like"
    paths["thesis_dir"].mkdir()
    shutil.copyfile(paths["stream"], paths["thesis_dir"] / "swapio.parquet")
    (paths["thesis_dir"] / "ssd-thesis.json").write_text('{"request_size_gain": "big", "sequential_write_gain": [1]}')
    paths["empty_dir"] = base / "empty-folder"
    paths["empty_dir"].mkdir()
    paths["dataset"] = make_dataset(paths["access"], base / "ds.access.parquet")
    for name, make in dataset_variants().items():
        paths[f"dmg_dataset_{name}"] = make(paths["dataset"], base / f"ds-{name}.access.parquet")
    paths["access_2m"] = base / "t2m.access.parquet"
    assert invoke("generate", "--preset", "tiny", "--steps", 2, "--page-bytes", "2MiB", "-o",
                  paths["access_2m"]).exit_code == 0
    paths["stream_2m"] = base / "t2m.swapio.parquet"
    assert invoke("emulate", paths["access_2m"], "--memory-fraction", "0.5", "-o", paths["stream_2m"]).exit_code == 0
    paths["spec_huge"] = base / "spec-huge.toml"  # 2^31 rows x 65536 dims x 4096 tables: past any machine
    paths["spec_huge"].write_text(_SPEC_BASE.format(batch=4).replace("rows = 100", "rows = 2147483648")
                                  + "dim = 65536\ncount = 4096\n")
    paths["spec_dim_ok"] = base / "spec-ok.toml"
    paths["spec_dim_ok"].write_text(_SPEC_BASE.format(batch=4) + "dim = 4\n")
    paths["run_dir"] = fake_run_dir(base / "run")
    _hostile_inputs(paths, base)
    paths["fifo_toml"] = base / "fifo.toml"
    os.mkfifo(paths["fifo_toml"])
    paths["fifo_json"] = base / "fifo.json"
    os.mkfifo(paths["fifo_json"])
    paths["fifo_log"] = base / "fifo.iolog"
    os.mkfifo(paths["fifo_log"])
    return paths


def _hostile_inputs(paths: dict, base: Path) -> None:
    """The damaged inputs of the readers issue 30's full-size hostile pass found failing: job folders with a
    damaged manifest, run folders with a damaged results file, a capture and a process trace damaged."""
    import json


    good = json.loads((paths["jobs"] / "manifest.json").read_text())
    for name, change in _MANIFEST_ROWS.items():
        d = base / (f"jobs-{name}" if change is not None else "fifo-jobs")  # fifo*: left out of copies of base
        shutil.copytree(paths["jobs"], d)
        (d / "manifest.json").unlink()
        if change is None:
            os.mkfifo(d / "manifest.json")
            continue
        if isinstance(change, str):
            text = change
        elif change[0] == "job":
            text = json.dumps({**good, "jobs": [{**good["jobs"][0], change[1]: change[2]}, *good["jobs"][1:]]})
        else:
            text = json.dumps({**good, change[0]: change[1]})
        (d / "manifest.json").write_text(text)
        paths[f"dmg_jobs_{name}"] = d
    paths["dmg_jobs_fifo"] = base / "fifo-jobs"
    paths["jobs_fifo_manifest"] = base / "fifo-jobs-out"
    paths["jobs_fifo_manifest"].mkdir()
    os.mkfifo(paths["jobs_fifo_manifest"] / "manifest.json")
    for name, path in damage("fio-run", paths["run_dir"], base / "damaged-fiorun").items():
        paths[f"dmg_fiorun_{name}"] = path
    paths["capture"] = fake_capture(paths["stream"], base / "capture.swapio.parquet")  # of `swaptrace train`
    for name, path in damage("capture", paths["capture"], base / "damaged-capture").items():
        paths[f"dmg_capture_{name}"] = path
    paths["process"] = base / "process.access.parquet"
    assert invoke("generate", "--preset", "tiny", "--steps", 2, "--runtime", "pytorch-cpu", "-o",
                  paths["process"]).exit_code == 0
    for name, path in damage("process", paths["process"], base / "damaged-process").items():
        paths[f"dmg_process_{name}"] = path


def _fill(args: list[str], inputs: dict, out) -> list[str]:
    values = {k: str(v) for k, v in inputs.items()} | {"out": str(out)}
    return [a.format(**values) for a in args]


def test_the_table_is_large_and_its_ids_unique():
    assert len(ROWS) >= 1000
    assert len({cls for cls, _ in ROWS}) == len(ROWS)


def test_every_row_has_a_control_or_a_reason():
    for cls, args in ROWS:
        if control_for(cls, args) is None:
            assert cls in CONTROLS or cls.startswith(tuple(NO_CONTROL_PREFIXES)), cls


#: a good value for the options whose absence would fail the control (a budget, a required size)
GOOD = {(cmd, opt): value for cmd in ("emulate", "designs", "sweep", "capture")
        for opt, value in (("--memory", "8MiB"), ("--memory-fraction", "0.5"))} | {("time", "--device"): "nvme-tlc",
                                                                                   ("sweep", "--trace"): "{access}"}
#: placeholders of files that are not good inputs (the rows' bad files)
BAD_FILES = {"{badtoml}", "{folder}", "{plain}", "{text}", "{empty}", "{corrupt}", "{base}/no-such.parquet", "{base}/nope.parquet",
             "{fifo}", "{folder}/", "{other_access}", "{stream_2m}", "{device_op1000}", "{spec_huge}"}
#: rows whose control is given here (None: no control, with the reason)
CONTROLS: dict[str, list[str] | None] = {
    "unknown command": None, "unknown fio subcommand": None, "ssd unknown subcommand": None,  # nothing to run
    "generate -o empty": ["generate", "--preset", "tiny", "--steps", "2", "-o", OUT + "/g.access.parquet"],
    "generate -o folder": ["generate", "--preset", "tiny", "--steps", "2", "-o", OUT + "/g.access.parquet"],
    "generate --steps absent-folder-parent-is-file": ["generate", "--preset", "tiny", "--steps", "2", "-o",
                                                      OUT + "/g.access.parquet"],
    "export -o missing": ["export", "{access}", "-o", OUT + "/e.csv"],
    "capture no trace": None,
    "sweep nothing to sweep": SWEEP_CONTROL,
    "sweep no budget": SWEEP_CONTROL,
    "sweep no -o": SWEEP_CONTROL,
    "designs no budget": ["designs", "{access}", "-o", OUT + "/d", "--device", "none", "--memory-fraction", "0.5"],
    "emulate no budget": ["emulate", "{access}", "-o", OUT + "/s.swapio.parquet", "--memory-fraction", "0.5"],
    "time no device": ["time", "{stream}", "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", "1",
                       "--reclaim-cpu-us", "1"],
    "ssd replay too small a device": ["ssd", "replay", "{stream}", "--device", "nvme-tlc", "--capacity", "4GiB",
                                      "-o", OUT + "/t.parquet"],
    "fio compare --model missing": ["fio", "compare", "{run_dir}"],
    "report of an empty folder": ["report", "{thesis_dir}", "-o", OUT + "/r"],
    "compare streams of different page sizes": ["compare", "{stream}", "{stream}"],
    "generate --preset and --spec": ["generate", "--preset", "tiny", "-o", OUT + "/g.access.parquet"],
    "generate --workers and --scheduler": ["generate", "--preset", "tiny", "-o", OUT + "/g.access.parquet"],
    "run -o a file": PRUN,
    **{f"report {k}": ["report", "{thesis_dir}", "-o", OUT + "/r"]
       for k in ("-o the input folder", "-o a parent of the input", "-o a folder of other files", "-o a file")},
    **{f"run --designs with {k}": PRUN for k in ("--policy bogus", "--device bogus", "--memory 1TiB")},
    "run --fio-profile with --no-fio": PRUN,
    "sweep --workers and --scheduler": SWEEP_CONTROL,
    **{f"fio run jobs-dir {k}": ["fio", "run", "{jobs}", "--target", OUT + "/target.dat", "-o", OUT + "/run"]
       for k in ("missing", "file", "not-jobs")},
    **{f"fio profile {k}": ["fio", "profile", "{run_dir}", "-o", OUT + "/p.toml"]
       for k in ("run-dir missing", "run-dir file", "run-dir not-a-run", "run-dir jobs-not-run", "-o missing",
                 "-o folder")},
    **{f"fio import log {k}": ["fio", "import", "{iolog}", "-o", OUT + "/i.swapio.parquet"]
       for k in ("missing", "folder", "parquet", "empty-file")},
    "generate a spec of 6 EiB": ["generate", "--spec", "{spec_dim_ok}", "--steps", "1", "-o", OUT + "/g.parquet"],
    **{f"fio {c} {k}": ["fio", c, "{run_dir}"] for c in ("results", "compare")
       for k in ("missing", "file", "not-jobs")},
    "report missing folder": ["report", "{thesis_dir}", "-o", OUT + "/r"],
    # the fio options' rows: the command without fio (their control with fio would measure the disk)
    **{f"designs {o} {v}": ["designs", "{access}", "-o", OUT + "/d", "--memory-fraction", "0.5", "--device", "none"]
       for o, vs in (("--fio-size", ["abc", "empty", "0", "-1", "nan", "1e30"]),
                     ("--fio-runtime", ["abc", "0", "-1", "nan", "99999999999999999999"]),
                     ("--fio-requests", ["abc", "0", "-1", "99999999999999999999"]),
                     ("--fio-repeats", ["abc", "0", "-1", "99999999999999999999"])) for v in vs},
    **{f"run {o} {v}": PRUN
       for o, vs in (("--fio-size", ["abc", "0", "-1", "nan"]),
                     ("--fio-runtime", ["abc", "0", "-1", "99999999999999999999"])) for v in vs},
    "report a file": ["report", "{thesis_dir}", "-o", OUT + "/r"],
}
#: rows the control of which cannot run here, with the reason
NO_CONTROL_PREFIXES = {
    "capture": "a control would be a real kernel capture (root, the machine-wide lock, minutes): tests/test_capture_*",
    "preset:": "the preset rows read one named file; there is no option to get past",
    "spec:": "the spec rows give one bad file; the control is `presets tiny` (the presets rows)",
}


def _kind_at(args: list[str]) -> str:
    """The file kind a command's positional file is: a swap stream or an access trace."""
    reads_stream = args[0] in ("compare", "time") or args[:2] in (["fio", "jobs"], ["ssd", "replay"]) \
        or "mqsim" in args
    return "{stream}" if reads_stream else "{access}"


#: the good positional file of each command whose positional argument is not a trace or stream
GOOD_POSITIONAL = {("fio", "import"): "{iolog}", ("fio", "run"): "{jobs}", ("fio", "profile"): "{run_dir}",
                   ("runtime-profile",): "{capture}",
                   ("fio", "results"): "{run_dir}", ("fio", "compare"): "{run_dir}", ("report",): "{thesis_dir}",
                   ("presets",): "tiny"}


def _is_option(a: str) -> bool:
    """An option's name (``--steps``, ``-o``), not a value such as ``-1`` or ``-inf``."""
    return bool(re.match(r"^--[a-z]", a)) or a == "-o"


def _named(cls: str, args: list[str]) -> str | None:
    """The (last) option a row's name names, if the row's arguments hold it (``--force`` is never the subject)."""
    named = [w for w in cls.split() if _is_option(w) and w != "--force" and w in args]
    return named[-1] if named else None


def _bad_index(cls: str, args: list[str]) -> int | None:
    """Where the row's bad file is in its arguments (a wrong-kind row: the good file of the other kind)."""
    if "swapio-kind" in cls or "access-kind" in cls:
        wrong = "{stream}" if "swapio-kind" in cls else "{access}"
        return len(args) - 1 - args[::-1].index(wrong)
    bad = [i for i, a in enumerate(args) if _is_bad_file(a)]
    return bad[-1] if bad else None


def _is_bad_file(a: str) -> bool:
    return a in BAD_FILES or a.startswith(("{dmg_", "{fifo", "{iolog_", "{kprofile_", "{devprof_", "{sweep_",
                                            "{spec_", "{base}/", "{folder}"))


def _without(args: list[str], i: int, takes_value: bool) -> list[str]:
    """``args`` without the option at ``i`` (and its value), given a good value where leaving it out fails."""
    opt = args[i]
    rest = args[:i] + args[i + 2 if takes_value else i + 1:]
    if opt in ("-o", "--output", "--plot"):
        if opt in rest:  # the row gave it a second time (click takes the last): the command's own good one stands
            return rest
        return rest + [opt, OUT + ("/ok.png" if opt == "--plot" else "/ok")]
    return rest + ([opt, GOOD[(args[0], opt)]] if (args[0], opt) in GOOD and opt not in rest else [])


def control_for(cls: str, args: list[str]) -> list[str] | None:
    """The row's control: its command with a good value (or none) in place of the bad one; None if there is none
    (then NO_CONTROL_PREFIXES or CONTROLS says why)."""
    if cls in CONTROLS:
        return CONTROLS[cls]
    if cls.startswith(tuple(NO_CONTROL_PREFIXES)):
        return None
    i = _bad_index(cls, args)
    if i is not None:
        if args[i - 1].startswith("-"):  # an option's value: the option left out (or a good value)
            return _without(args, i - 1, True)
        if args[0] == "sweep":
            return SWEEP_CONTROL
        good = GOOD_POSITIONAL.get(tuple(args[:2]), GOOD_POSITIONAL.get(tuple(args[:1]), _kind_at(args)))
        return [good if j == i else a for j, a in enumerate(args)]
    opt = _named(cls, args)
    if opt is not None:  # the option the row names: its last occurrence (the one click uses) made good, or left out
        i = len(args) - 1 - args[::-1].index(opt)
        return _without(args, i, i + 1 < len(args) and not _is_option(args[i + 1]))
    if len(args) >= 2 and args[-2].startswith("-"):
        return args[:-2]
    if args[-1].startswith("-"):
        return args[:-1]
    raise AssertionError(f"{cls}: no control inferred; add it to CONTROLS")


def subject_of(cls: str, args: list[str], filled: list[str]) -> list[str]:
    """What the row's error line must name (any of the words): the option made bad (or the file it was given),
    or the bad file."""
    if cls in SUBJECTS:
        return SUBJECTS[cls]
    opt = _named(cls, args)
    if opt is not None:
        i = len(args) - 1 - args[::-1].index(opt)
        words = [opt, opt.lstrip("-"), opt.lstrip("-").replace("-", " "), opt.lstrip("-").replace("-", "_")]
        if i + 1 < len(filled) and "/" in filled[i + 1]:
            words.append(Path(filled[i + 1].rstrip("/")).name)
        return words
    i = _bad_index(cls, args)
    if i is not None:
        return [Path(filled[i].rstrip("/")).name or filled[i]]
    missing = {"budget": ["--memory", "budget"], "device": ["--device"], "-o": ["-o", "--output"],
               "trace": ["TRACE"]}
    for word, names in missing.items():
        if f" no {word}" in cls:
            return names
    if len(args) >= 2 and _is_option(args[-2]):
        return [args[-2]]
    return [""]


#: rows whose error names its subject in its own words
SUBJECTS: dict[str, list[str]] = {
    **{f"fio run --jobs {v}": ["--jobs", "job(s)"] for v in ("bogus", "seqwrite,bogus")},  # "unknown job(s) ..."
    "ssd synth --page-size 3000": ["page_bytes"],  # the device's field, with the value given
    "generate a spec of 6 EiB": ["would need"],  # names the trace's size and the memory it would need
    "generate --preset and --spec": ["--preset"],
    "fio profile -o missing": ["-o", "--output"],
    "sweep nothing to sweep": ["trace or preset"],
}


@pytest.fixture(scope="module")
def controls(inputs, tmp_path_factory):
    """Run each distinct control once (many rows share one), in its own folder; returns the cached results."""
    done: dict[tuple, tuple[int, str]] = {}

    def run(args: list[str]) -> tuple[int, str]:
        key = tuple(args)
        if key not in done:
            out = tmp_path_factory.mktemp("control")
            filled = _fill(args, inputs, out)
            if filled[:2] == ["fio", "run"]:
                filled.append("--dry-run")  # checks every option and the target, runs nothing
            r = invoke(*filled)
            done[key] = (r.exit_code, r.output[-400:])
        return done[key]

    return run


#: commands whose control takes seconds (a Dask cluster, the whole pipeline, the designs, the SSD study): their
#: rows are marked slow, so `make test-fast` runs the rest of the table in about a minute
SLOW_CONTROLS = (("sweep",), ("run",), ("designs",), ("ssd", "thesis"))


def _param(cls: str, args: list[str]):
    control = control_for(cls, args) or []
    slow = any(tuple(control[:len(c)]) == c for c in SLOW_CONTROLS)
    return pytest.param(cls, args, id=cls, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("cls,args", [_param(c, a) for c, a in ROWS])
def test_bad_input(inputs, controls, tmp_path, monkeypatch, cls, args):
    control = control_for(cls, args)
    if control is not None:  # the same command with a good value must pass: the row tests its own option
        code, output = controls(control)
        assert code == 0, f"the control {control} fails on its own: {output}"
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(tmp_path)  # generate's default output (traces/...) would land here
    before, before_inputs = snapshot(tmp_path), _listing(inputs["base"])
    filled = _fill(args, inputs, out)
    r = invoke(*filled)
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    assert "Traceback" not in r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    words = subject_of(cls, args, filled)
    assert any(w.lower() in lines[0].lower() for w in words), f"the error does not name {words[0]!r}: {lines[0]}"
    assert snapshot(tmp_path) == before, "left files behind"
    assert _listing(inputs["base"]) == before_inputs, "left files beside the inputs"


def _listing(folder: Path) -> set[str]:
    """What :func:`safety_helpers.snapshot` returns, by ``os.walk``: the inputs' folder holds ~800 paths and is
    listed twice per row, which ``Path.rglob`` and ``relative_to`` made a third of the table's time."""
    if not folder.exists():
        return set()
    found = {"."}
    for root, dirs, files in os.walk(folder, followlinks=True):  # rglob follows links to folders too
        rel = os.path.relpath(root, folder)
        found.update(name if rel == "." else os.path.join(rel, name) for name in dirs + files)
    return found


#: rows run as real processes: the interpreter's own stderr, exit code and nothing after it
SUBPROCESS_ROWS = ["generate --spec dim", "emulate trace corrupt-pages", "mrc trace corrupt-pages",
                   "export csv corrupt-pages", "mrc --plot OUT/x.xyz", "ssd synth --volume nanx",
                   "ssd thesis --drive-writes nan", "run --memory 0", "run --memory-fraction nan",
                   "run --ssd-capacity 0", "emulate --policy bogus", "fio jobs --sweep empty",
                   "generate --scheduler bogus", "sweep file wrong-type", "sweep --workers 0",
                   "emulate --profile toml-binary", "designs trace corrupt-pages"]


@pytest.mark.parametrize("cls", SUBPROCESS_ROWS)
def test_bad_input_in_a_real_process(inputs, tmp_path, cls):
    (args,) = [a for c, a in ROWS if c == cls]
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(tmp_path)
    env = dict(os.environ, PYTHONWARNINGS="error")
    exe = Path(sys.executable).with_name("swaptrace")  # the installed console script, as users run it
    r = subprocess.run([str(exe), *_fill(args, inputs, out)], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert snapshot(tmp_path) == before


def test_a_run_whose_stream_is_empty_gets_a_report(tmp_path):
    # the whole footprint fits: no swap I/O at all, so the SSD summary has no WAF (None)
    # (a 4 GiB drive: the report's n/a does not depend on the drive's size, whose steady state takes seconds)
    r = invoke("run", "--preset", "tiny", "--steps", "3", "--memory-fraction", "1", "--no-fio", "--no-thesis",
               "--ssd-capacity", "4GiB", "-o", tmp_path / "p")
    assert r.exit_code == 0, r.output
    from swaptrace.core.traceio import open_trace

    assert open_trace(tmp_path / "p" / "swapio.parquet").num_rows == 0
    text = (tmp_path / "p" / "report" / "report.md").read_text()
    assert "n/a" in text


def test_a_failing_report_leaves_the_earlier_one_whole(inputs, tmp_path, monkeypatch):
    import shutil

    from swaptrace.pipeline import report as rep

    folder = tmp_path / "f"
    shutil.copytree(inputs["base"], folder, ignore=shutil.ignore_patterns("*.toml", "*.iolog", "other-files", "fifo*"))
    shutil.copyfile(inputs["access"], folder / "access.parquet")
    shutil.copyfile(inputs["stream"], folder / "swapio.parquet")
    assert invoke("report", folder).exit_code == 0
    first = {p.name: p.read_bytes() for p in (folder / "report").iterdir()}
    calls = []

    def failing(out, name, draw, report, size=(7, 4)):
        calls.append(name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a Ctrl-C half-way through the figures
        return real(out, name, draw, report, size)

    real = rep._figure
    monkeypatch.setattr(rep, "_figure", failing)
    before = snapshot(folder)
    r = invoke("report", folder)
    assert r.exit_code == 130
    assert snapshot(folder) == before  # no partial folder beside it
    assert {p.name: p.read_bytes() for p in (folder / "report").iterdir()} == first


def test_a_report_leaves_out_a_damaged_part_and_names_it(inputs, tmp_path):
    """A damaged model-vs-fio.json (a field of the wrong type) is left out of the report with one line naming the
    file, and a pipeline.json that is a FIFO is never read (the report finishes): issue 30's hostile pass found the
    first a TypeError and the second a read blocked forever."""
    folder = tmp_path / "f"
    folder.mkdir()
    shutil.copyfile(inputs["access"], folder / "access.parquet")
    shutil.copyfile(inputs["stream"], folder / "swapio.parquet")
    (folder / "model-vs-fio.json").write_text('{"fitted": "yes", "device": "d.toml", "jobs": [], "replays": []}')
    r = invoke("report", folder, "-o", tmp_path / "r")
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    skipped = [line for line in r.stderr.splitlines() if line.startswith("skipped model vs fio")]
    assert len(skipped) == 1 and "model-vs-fio.json" in skipped[0] and "damaged" in skipped[0], r.stderr
    os.mkfifo(folder / "pipeline.json")
    exe = Path(sys.executable).with_name("swaptrace")
    done = subprocess.run([str(exe), "report", str(folder), "-o", str(tmp_path / "r2")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "r2" / "report.md").is_file()
