"""Our SSD model and MQSim side by side on the same swap I/O stream and an equivalent drive.

MQSim (Tavakkol et al., FAST 2018; github.com/CMU-SAFARI/MQSim) is a
discrete-event SSD simulator validated against real drives. Build it once::

    git clone https://github.com/CMU-SAFARI/MQSim && cd MQSim && make -j2   # g++ (C++11), ~5-20 min
    export MQSIM=$PWD/MQSim

Then ``python benchmarks/bench_mqsim.py [--stream swapio.parquet] [--requests N]``. Without a binary
(``--mqsim``, ``$MQSIM``, or ``MQSim`` on the PATH) it prints our side only and says that MQSim was
skipped.

What it does:

1. the stream: ``--stream`` (kind ``swapio``) or a synthetic swap-like one (``--requests`` requests,
   4-32 KiB, half reads, uniform random offsets in a 32 GiB swap area (a quarter of a smaller drive),
   one request every 100 µs; ``--blocks-per-plane`` shrinks both drives);
2. exports it with ``swaptrace export --format mqsim`` (the same function);
3. writes MQSim's ``ssdconfig.xml`` for our ``mqsim-default`` preset (MQSim's own default drive:
   8 channels x 4 chips x 2 dies x 2 planes x 2048 blocks x 256 x 8 KiB, OP 7 %, GC at 5 % free,
   greedy, no copyback, ideal mapping table so neither side pays mapping-table reads) and a
   trace-based workload (nanosecond arrivals, ``Initial_Occupancy_Percentage``, MQSim's own
   steady-state preconditioning on);
4. runs both -- ours with timestamps (open loop, as MQSim replays a trace), starting in the sampled
   steady state of a background with the same occupancy -- and prints one table: WAF, bandwidth,
   read latency (ours: percentiles; MQSim reports mean and max only), simulated time and
   simulation speed (requests per wall second).

``docs/ssd-mqsim.md`` explains where and why the two disagree.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swaptrace import SSDConfig, load_device, replay  # noqa: E402
from swaptrace.core import traceio  # noqa: E402
from swaptrace.ssd.steady import Background  # noqa: E402
from swaptrace.workload.export import export_mqsim  # noqa: E402

SWAP_BYTES = 32 << 30
OCCUPANCY = 0.9


def synthetic_stream(path: Path, requests: int, seed: int = 0, swap_bytes: int = SWAP_BYTES) -> Path:
    """A swap-like stream: 4-32 KiB (0.4/0.25/0.2/0.15), half reads, uniform offsets, every 100 µs."""
    rng = np.random.default_rng(seed)
    pages = rng.choice([1, 2, 4, 8], requests, p=[0.4, 0.25, 0.2, 0.15])
    off = rng.integers(0, swap_bytes // 4096 - 8, requests) * 4096
    op = np.where(rng.random(requests) < 0.5, traceio.OP_READ, traceio.OP_WRITE).astype(np.int8)
    cause = np.where(op == traceio.OP_WRITE, traceio.CAUSE_RECLAIM, traceio.CAUSE_FAULT).astype(np.int8)
    meta = {"source": "synthetic", "page_bytes": 4096, "device_bytes": swap_bytes,
            "summary": {"bytes_written": int(((op == traceio.OP_WRITE) * pages).sum() * 4096)}}
    with traceio.TraceWriter(path, "swapio", meta, force=True) as w:
        w.write(t_us=np.arange(requests) * 100.0, step=np.zeros(requests, dtype=np.int64), op=op, offset=off,
                length=(pages * 4096).astype(np.uint32), cause=cause)
    return path


def drive(blocks_per_plane: int | None = None) -> SSDConfig:
    # MQSim moves GC data over the channel when copyback is off (its default)
    return load_device("mqsim-default", {"gc_copyback": False, "blocks_per_plane": blocks_per_plane})


def mqsim_config_xml(cfg: SSDConfig) -> str:
    """MQSim's Execution_Parameter_Set for ``cfg`` (tags as in MQSim's own ssdconfig.xml)."""
    chips = 4
    dies_per_chip = cfg.dies_per_channel // chips
    op = (cfg.physical_units - cfg.user_units) / cfg.physical_units  # MQSim's ratio is of the physical space
    ns = {k: int(round(getattr(cfg, k) * 1000)) for k in ("read_us", "program_us", "erase_us")}
    return f"""<?xml version="1.0" encoding="us-ascii"?>
<Execution_Parameter_Set>
  <Host_Parameter_Set>
    <PCIe_Lane_Bandwidth>1.0</PCIe_Lane_Bandwidth><PCIe_Lane_Count>4</PCIe_Lane_Count>
    <SATA_Processing_Delay>400000</SATA_Processing_Delay>
    <Enable_ResponseTime_Logging>false</Enable_ResponseTime_Logging>
    <ResponseTime_Logging_Period_Length>1000000</ResponseTime_Logging_Period_Length>
  </Host_Parameter_Set>
  <Device_Parameter_Set>
    <Seed>321</Seed><Enabled_Preconditioning>true</Enabled_Preconditioning><Memory_Type>FLASH</Memory_Type>
    <HostInterface_Type>NVME</HostInterface_Type><IO_Queue_Depth>65535</IO_Queue_Depth>
    <Queue_Fetch_Size>512</Queue_Fetch_Size><Caching_Mechanism>ADVANCED</Caching_Mechanism>
    <Data_Cache_Sharing_Mode>SHARED</Data_Cache_Sharing_Mode>
    <Data_Cache_Capacity>{cfg.write_buffer_bytes}</Data_Cache_Capacity>
    <Data_Cache_DRAM_Row_Size>8192</Data_Cache_DRAM_Row_Size><Data_Cache_DRAM_Data_Rate>100</Data_Cache_DRAM_Data_Rate>
    <Data_Cache_DRAM_Data_Busrt_Size>1</Data_Cache_DRAM_Data_Busrt_Size><Data_Cache_DRAM_tRCD>13</Data_Cache_DRAM_tRCD>
    <Data_Cache_DRAM_tCL>13</Data_Cache_DRAM_tCL><Data_Cache_DRAM_tRP>13</Data_Cache_DRAM_tRP>
    <Address_Mapping>PAGE_LEVEL</Address_Mapping><Ideal_Mapping_Table>true</Ideal_Mapping_Table>
    <CMT_Capacity>2097152</CMT_Capacity><CMT_Sharing_Mode>SHARED</CMT_Sharing_Mode>
    <Plane_Allocation_Scheme>CWDP</Plane_Allocation_Scheme>
    <Transaction_Scheduling_Policy>PRIORITY_OUT_OF_ORDER</Transaction_Scheduling_Policy>
    <Overprovisioning_Ratio>{op:.5f}</Overprovisioning_Ratio>
    <GC_Exec_Threshold>{cfg.gc_free_fraction:.5f}</GC_Exec_Threshold>
    <GC_Block_Selection_Policy>{cfg.gc_policy.upper()}</GC_Block_Selection_Policy>
    <Use_Copyback_for_GC>{str(cfg.gc_copyback).lower()}</Use_Copyback_for_GC>
    <Preemptible_GC_Enabled>false</Preemptible_GC_Enabled><GC_Hard_Threshold>0.005</GC_Hard_Threshold>
    <Dynamic_Wearleveling_Enabled>false</Dynamic_Wearleveling_Enabled>
    <Static_Wearleveling_Enabled>false</Static_Wearleveling_Enabled>
    <Static_Wearleveling_Threshold>100</Static_Wearleveling_Threshold>
    <Preferred_suspend_erase_time_for_read>700000</Preferred_suspend_erase_time_for_read>
    <Preferred_suspend_erase_time_for_write>700000</Preferred_suspend_erase_time_for_write>
    <Preferred_suspend_write_time_for_read>100000</Preferred_suspend_write_time_for_read>
    <Flash_Channel_Count>{cfg.channels}</Flash_Channel_Count><Flash_Channel_Width>1</Flash_Channel_Width>
    <Channel_Transfer_Rate>{int(cfg.channel_mb_s)}</Channel_Transfer_Rate>
    <Chip_No_Per_Channel>{chips}</Chip_No_Per_Channel><Flash_Comm_Protocol>NVDDR2</Flash_Comm_Protocol>
    <Flash_Parameter_Set>
      <Flash_Technology>MLC</Flash_Technology><CMD_Suspension_Support>ERASE</CMD_Suspension_Support>
      <Page_Read_Latency_LSB>{ns['read_us']}</Page_Read_Latency_LSB>
      <Page_Read_Latency_CSB>{ns['read_us']}</Page_Read_Latency_CSB>
      <Page_Read_Latency_MSB>{ns['read_us']}</Page_Read_Latency_MSB>
      <Page_Program_Latency_LSB>{ns['program_us']}</Page_Program_Latency_LSB>
      <Page_Program_Latency_CSB>{ns['program_us']}</Page_Program_Latency_CSB>
      <Page_Program_Latency_MSB>{ns['program_us']}</Page_Program_Latency_MSB>
      <Block_Erase_Latency>{ns['erase_us']}</Block_Erase_Latency><Block_PE_Cycles_Limit>10000</Block_PE_Cycles_Limit>
      <Suspend_Erase_Time>700000</Suspend_Erase_Time><Suspend_Program_Time>100000</Suspend_Program_Time>
      <Die_No_Per_Chip>{dies_per_chip}</Die_No_Per_Chip><Plane_No_Per_Die>{cfg.planes}</Plane_No_Per_Die>
      <Block_No_Per_Plane>{cfg.blocks_per_plane}</Block_No_Per_Plane><Page_No_Per_Block>{cfg.pages_per_block}</Page_No_Per_Block>
      <Page_Capacity>{cfg.page_bytes}</Page_Capacity><Page_Metadat_Capacity>448</Page_Metadat_Capacity>
    </Flash_Parameter_Set>
  </Device_Parameter_Set>
</Execution_Parameter_Set>
"""


def mqsim_workload_xml(cfg: SSDConfig, trace: Path) -> str:
    ids = ",".join
    return f"""<?xml version="1.0" encoding="us-ascii"?>
<MQSim_IO_Scenarios>
  <IO_Scenario>
    <IO_Flow_Parameter_Set_Trace_Based>
      <Priority_Class>HIGH</Priority_Class>
      <Device_Level_Data_Caching_Mode>WRITE_CACHE</Device_Level_Data_Caching_Mode>
      <Channel_IDs>{ids(str(i) for i in range(cfg.channels))}</Channel_IDs>
      <Chip_IDs>0,1,2,3</Chip_IDs>
      <Die_IDs>{ids(str(i) for i in range(cfg.dies_per_channel // 4))}</Die_IDs>
      <Plane_IDs>{ids(str(i) for i in range(cfg.planes))}</Plane_IDs>
      <Initial_Occupancy_Percentage>{int(OCCUPANCY * 100)}</Initial_Occupancy_Percentage>
      <File_Path>{trace}</File_Path>
      <Percentage_To_Be_Executed>100</Percentage_To_Be_Executed>
      <Relay_Count>1</Relay_Count>
      <Time_Unit>NANOSECOND</Time_Unit>
    </IO_Flow_Parameter_Set_Trace_Based>
  </IO_Scenario>
</MQSim_IO_Scenarios>
"""


def _attr(xml: str, name: str) -> float:
    """A number from MQSim's result XML, written either as ``name="v"`` or as ``<name>v</name>``."""
    m = re.search(rf'\b{name}="([0-9.eE+-]+)"', xml) or re.search(rf"<{name}>([0-9.eE+-]+)</{name}>", xml)
    return float(m.group(1)) if m else float("nan")


def run_mqsim(binary: str, cfg: SSDConfig, trace: Path, work: Path, keep: Path | None = None) -> dict[str, float]:
    (work / "ssdconfig.xml").write_text(mqsim_config_xml(cfg))
    (work / "workload.xml").write_text(mqsim_workload_xml(cfg, trace))
    t0 = time.perf_counter()
    first_progress = None  # MQSim prints a progress bar once requests complete: after its preconditioning
    with subprocess.Popen([binary, "-i", "ssdconfig.xml", "-w", "workload.xml"], cwd=work, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        for line in proc.stdout:
            if first_progress is None and "%" in line and "[" in line:
                first_progress = time.perf_counter()
    if proc.returncode:
        raise RuntimeError(f"MQSim failed with exit code {proc.returncode}")
    end = time.perf_counter()
    wall = end - (first_progress or t0)
    result = next(work.glob("workload_scenario_*.xml"))
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        for f in (result, work / "ssdconfig.xml", work / "workload.xml"):
            shutil.copy(f, keep / f.name)
    out = result.read_text()
    requests = _attr(out, "Request_Count")
    w_bytes = _attr(out, "Bytes_Transferred_Write")
    gc_moves = _attr(out, "Total_GC_Executions") * _attr(out, "Average_Page_Movement_For_GC")
    host_pages = w_bytes / cfg.page_bytes
    programs = sum(_attr(out, f"Issued_Flash_{k}Program_CMD") * m for k, m in
                   (("", 1), ("Interleaved_", 1), ("Multiplane_", 2), ("Interleaved_Multiplane_", 2),
                    ("Copyback_", 1), ("Multiplane_Copyback_", 2)))
    return {
        # flash pages programmed per host page written (a 4 KiB write programs a whole 8 KiB page in MQSim)
        "waf": programs * cfg.page_bytes / w_bytes if w_bytes else float("nan"),
        "gc_moves_per_host_page": gc_moves / host_pages if host_pages else float("nan"),
        "setup_s": (first_progress or t0) - t0,
        "bandwidth_mb_s": _attr(out, "Bandwidth") / 1e6,
        "read_mean_us": _attr(out, "Device_Response_Time"),  # MQSim: all requests, µs
        "read_p50_us": float("nan"), "read_p99_us": float("nan"),
        "requests": requests, "wall_s": wall, "rate": requests / wall,
        "gc_executions": _attr(out, "Total_GC_Executions"),
    }


def run_ours(cfg: SSDConfig, stream: Path) -> dict[str, float]:
    tf = traceio.open_trace(stream, "swapio")
    swap = int(tf.meta["device_bytes"])
    fill = max(0.0, (OCCUPANCY * cfg.user_bytes - swap) / (cfg.user_bytes - swap))
    t0 = time.perf_counter()
    res = replay(stream, cfg, iodepth=0, use_timestamps=True, precondition="steady",
                 background=Background(fill=fill, overwritten=1.0, swap_prior="pool"))
    wall = time.perf_counter() - t0
    s = res.summary
    start_s = s["start"]["seconds"]
    wall = s["run_wall_s"]  # the replay itself (not the drive's set-up)
    reads = _read_latencies(cfg, stream, fill)
    gc_moves = s["gc_write_bytes"] / max(s["host_write_bytes"], 1)
    return {"waf": s["waf"], "gc_moves_per_host_page": gc_moves, "setup_s": start_s, "bandwidth_mb_s": s["throughput_mb_s"], "read_mean_us": reads[0],
            "read_p50_us": reads[1], "read_p99_us": reads[2], "requests": s["requests"], "wall_s": wall,
            "rate": s["requests_per_wall_s"], "steady_init_s": start_s}


def _read_latencies(cfg: SSDConfig, stream: Path, fill: float) -> tuple[float, float, float]:
    """Mean, p50, p99 read latency (µs) of a second replay, reads only (the summary mixes reads and writes)."""
    from swaptrace.ssd.run import map_units
    from swaptrace.ssd.simulate import Simulator
    from swaptrace.ssd.steady import layout

    tf = traceio.open_trace(stream, "swapio")
    swap_units = int(tf.meta["device_bytes"]) // cfg.map_bytes
    sim = Simulator(cfg, timing=True, iodepth=0, use_timestamps=True)
    sim.start_steady(layout(cfg, 0, swap_units, Background(fill, 1.0, "pool")))
    lat = []
    for b in tf.iter_batches(["t_us", "op", "offset", "length"]):
        lpn, n = map_units(b["offset"], b["length"], cfg.map_bytes, cfg.user_units, swap_units, "error")
        out = sim.run(b["op"].astype(np.int8), lpn, n, b["t_us"].astype(np.float64))
        lat.append(out["latency_us"][b["op"] == traceio.OP_READ])
    x = np.concatenate(lat)
    return float(x.mean()), float(np.percentile(x, 50)), float(np.percentile(x, 99))


def _fmt(x: float, spec: str) -> str:
    return "n/a" if x != x else format(x, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", type=Path, default=None, help="swapio stream (default: synthetic)")
    parser.add_argument("--requests", type=int, default=100_000, help="synthetic stream length")
    parser.add_argument("--keep", type=Path, default=None, help="copy MQSim's config, workload and result XML here")
    parser.add_argument("--blocks-per-plane", type=int, default=None,
                        help="shrink both drives (default: MQSim's 2048, 512 GiB raw; MQSim's own preconditioning "
                             "of the full drive takes many minutes)")
    parser.add_argument("--mqsim", default=os.environ.get("MQSIM") or shutil.which("MQSim"),
                        help="MQSim binary (default $MQSIM or MQSim on the PATH)")
    parser.add_argument("--quick", action="store_true", help="a smoke run (run_all.py --quick): 10,000 requests")
    args = parser.parse_args()
    if args.quick:
        args.requests = min(args.requests, 10_000)
    cfg = drive(args.blocks_per_plane)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stream = args.stream or synthetic_stream(work / "swapio.parquet", args.requests,
                                                 swap_bytes=min(SWAP_BYTES, cfg.user_bytes // 4 // 4096 * 4096))
        trace, _ = export_mqsim(stream, work / "stream.trace")
        ours = run_ours(cfg, stream)
        theirs = None
        if args.mqsim and Path(args.mqsim).exists():
            theirs = run_mqsim(args.mqsim, cfg, trace.resolve(), work, args.keep)
        else:
            print("MQSim skipped: no binary (build it as the docstring says and set $MQSIM or pass --mqsim)\n")
    rows = [("WAF (flash bytes programmed / host bytes written)", "waf", ".2f"),
            ("GC moves per host page written", "gc_moves_per_host_page", ".2f"), ("bandwidth, MB/s", "bandwidth_mb_s", ".0f"),
            ("read latency mean, µs (MQSim: all requests)", "read_mean_us", ".0f"),
            ("read latency p50, µs", "read_p50_us", ".0f"), ("read latency p99, µs", "read_p99_us", ".0f"),
            ("requests", "requests", ",.0f"), ("steady state / preconditioning, wall s", "setup_s", ".1f"),
            ("wall time of the replay, s", "wall_s", ".1f"),
            ("simulation speed, requests/s", "rate", ",.0f")]
    print(f"stream: {stream if args.stream else f'synthetic, {args.requests:,} requests'}; drive: {cfg.name} "
          f"({cfg.physical_bytes >> 30} GiB raw, OP {cfg.physical_op:.1%}, effective {cfg.effective_op:.1%}), "
          f"occupancy {OCCUPANCY:.0%}; our steady state sampled in {ours['steady_init_s']:.1f} s\n")
    print("| metric | swaptrace | MQSim |\n|---|---:|---:|")
    for label, key, spec in rows:
        print(f"| {label} | {_fmt(ours[key], spec)} | {'skipped' if theirs is None else _fmt(theirs[key], spec)} |")


if __name__ == "__main__":
    main()
