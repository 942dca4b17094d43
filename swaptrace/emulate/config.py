"""The emulator's one frozen configuration: every parameter validated, and the budget rule.

:meth:`EmulatorConfig.resolve` turns what a user gives (a DRAM budget in bytes
*or* as a fraction of the footprint, a policy, writeback options, a kernel
profile) into the concrete values a run uses, checking each and naming the bad
one in a :class:`~swaptrace.errors.ConfigError`. ``emulate``, ``capture`` and
the pipeline all size memory with :meth:`EmulatorConfig.budget_pages`, so the
emulator and the kernel always get the same number of pages.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from swaptrace.core.bounds import check_allocation
from swaptrace.core.units import format_bytes
from swaptrace.emulate.kernel_profile import KernelProfile, load_profile
from swaptrace.errors import ConfigError
from swaptrace.kernels.emulate import state as ks
from swaptrace.workload.process import RuntimeProfile, anon_budget_bytes, runtime_of

#: the time model's step duration: the order of one CPU training iteration of the shipped presets
DEFAULT_STEP_US = 100_000.0
#: largest merged request: the block layer's default ``max_sectors_kb`` of 512 KiB
DEFAULT_MAX_REQUEST_BYTES = 512 * 1024
#: the ``linux`` policy's defaults come from the default kernel profile (``swaptrace/profiles``)
_DEFAULTS = load_profile().linux
DEFAULT_WRITEBACK_LAG: int = _DEFAULTS["writeback_lag"]
DEFAULT_STATS_FLUSH_STEPS: int = _DEFAULTS["stats_flush_steps"]
DEFAULT_SCAN_PRIORITIES: bool = _DEFAULTS["scan_priorities"]
DEFAULT_WRITEBACK_COMPLETION: str = _DEFAULTS["writeback_completion"]
DEFAULT_WRITE_COST: int = _DEFAULTS["write_cost"]
DEFAULT_FILL_WRITE_CREDIT: int = _DEFAULTS["fill_write_credit"]
DEFAULT_WRITE_LATENCY: int = _DEFAULTS["write_latency"]

#: writeback completion rules by name (``--writeback-completes``); each write also completes at the next
#: major fault and when reclaim meets it again
WRITEBACK_COMPLETIONS: dict[str, str] = {
    "lag": "once reclaim has isolated writeback_lag more pages, or a call has written lag + throttle",
    "level": "as the priority level of the reclaim call that wrote it ends (blk_finish_plug; needs scan_priorities)",
    "next-level": "as the priority level after the one that wrote it ends, in the same call or the next "
                  "(needs scan_priorities)",
    "call": "as the reclaim call that wrote it returns (needs scan_priorities)",
    "device": "as a first-in first-out device gets to it: one page in the time reclaim isolates write_cost pages, "
              "a level's writes handed over as the level ends (needs scan_priorities)",
}
#: WRITEBACK_COMPLETIONS that work by priority level (the level's plug), and their kernel codes
BY_LEVEL = {"level": ks.WB_BY_LEVEL, "next-level": ks.WB_BY_NEXT_LEVEL, "call": ks.WB_BY_CALL,
            "device": ks.WB_BY_DEVICE}


@dataclass(frozen=True)
class Policy:
    """A residency policy: its kernel code, default reclaim batch and a one-line description."""

    code: int
    batch_pages: int
    description: str


#: residency policies by name (``--policy``)
POLICIES: dict[str, Policy] = {
    "lru": Policy(ks.POLICY_LRU, 1, "exact least-recently-used; evicts one page per page brought in"),
    "clock": Policy(ks.POLICY_CLOCK, 1, "second chance: a FIFO that spares a referenced page once"),
    "linux": Policy(
        ks.POLICY_LINUX,
        ks.SWAP_CLUSTER_MAX,
        "Linux active/inactive lists, young + referenced bits, refault activation, reclaim in batches of 32",
    ),
}
#: readahead modes by name (``--readahead``)
READAHEAD_MODES: dict[str, int] = {"none": ks.RA_NONE, "vma": ks.RA_VMA, "cluster": ks.RA_CLUSTER}
INITIAL_STATES = ("untouched", "swapped")
#: region kinds whose pages start on swap with ``initial_state="swapped"``
SWAPPED_REGION_KINDS = ("table", "table-state")


@dataclass(frozen=True)
class EmulatorConfig:
    """Validated emulator parameters (sizes in pages unless named otherwise).

    Build one with :meth:`resolve`; every field is concrete (no "not given").
    ``writeback_lag``, ``write_cost`` and ``fill_write_credit`` are 0 where
    their writeback rule does not use them.
    """

    policy: str
    budget_pages: int
    batch_pages: int
    readahead: str
    page_cluster: int
    cluster_slots: int
    nslots: int
    max_request_pages: int
    page_bytes: int
    step_us: float
    initial_state: str
    writeback_lag: int = 0
    zero_page: bool = False
    #: linux: a dirty page of zeros is swapped out and in without I/O (the swap zero map, Linux >= 6.12)
    zeromap: bool = False
    stats_flush_steps: int = 0
    scan_priorities: bool = False
    #: one of :data:`WRITEBACK_COMPLETIONS`; with those of :data:`BY_LEVEL` no write completes by the lag clock
    writeback_completion: str = "lag"
    #: "device" only: pages reclaim isolates in the time the device writes one page
    write_cost: int = 0
    #: "device" only: the device's time while the process zero-fills pages before the first swap-in, in
    #: eighths of a clock unit per zero-filled page
    fill_write_credit: int = 0
    #: "device" only: pages reclaim isolates between the device's service of a write and its completion
    write_latency: int = 0
    #: "device" only: the block layer's plug rules (a plug sent at 32 requests or a 128 KiB first request; a
    #: swap-in's reclaim inside the swap-in's plug); from the kernel profile, off unless it says so
    plug_rules: bool = False
    #: pages a reclaim call may write beyond the lag before it waits for all of them (a safety bound on
    #: the requests of one access, "lag" rule only; tests lower it to reach it)
    writeback_throttle: int = 2 * ks.SWAP_CLUSTER_MAX
    #: the fraction of the footprint the budget was asked as, if it was (recorded, not used by the run)
    memory_fraction: float | None = None
    #: a process trace's runtime profile (:func:`swaptrace.workload.process.runtime_of` of its metadata), parsed
    #: once here; None for a model's own trace. It set the budget and, unless one was given, the write cost.
    runtime: RuntimeProfile | None = None

    # ---- the budget rule ------------------------------------------------------------------------------
    @staticmethod
    def budget_pages_for(footprint_pages: int, page_bytes: int, *, memory_bytes: int | None = None,
                         memory_fraction: float | None = None) -> int:
        """The DRAM budget in whole pages: ``memory_bytes // page_bytes`` or ``floor(footprint * fraction)``.

        Exactly one of ``memory_bytes`` and ``memory_fraction`` must be given;
        the budget must hold a page and not exceed the footprint. The one rule
        for ``emulate``, ``capture`` and the pipeline.
        """
        footprint_bytes = footprint_pages * page_bytes
        if (memory_bytes is None) == (memory_fraction is None):
            raise ConfigError("give exactly one of --memory and --memory-fraction")
        if memory_fraction is not None:
            if not (0.0 < memory_fraction <= 1.0) or math.isnan(memory_fraction):
                raise ConfigError(f"--memory-fraction must be in (0, 1], got {memory_fraction}")
            budget = int(footprint_pages * memory_fraction)
        else:
            if memory_bytes <= 0:
                raise ConfigError(f"--memory must be positive (not negative or 0), got {memory_bytes}")
            if memory_bytes > footprint_bytes:
                raise ConfigError(f"--memory {format_bytes(memory_bytes)} is above the trace's footprint "
                                  f"{format_bytes(footprint_bytes)}: nothing would be swapped")
            budget = memory_bytes // page_bytes
        if budget < 1:
            raise ConfigError(f"memory budget is below one page ({format_bytes(page_bytes)}); give more memory")
        return int(budget)

    @property
    def memory_bytes(self) -> int:
        """The budget in bytes (whole pages)."""
        return self.budget_pages * self.page_bytes

    # ---- building ---------------------------------------------------------------------------------------
    @classmethod
    def resolve(
        cls,
        meta: dict[str, Any],
        *,
        memory_bytes: int | None = None,
        memory_fraction: float | None = None,
        policy: str = "linux",
        readahead: str = "vma",
        page_cluster: int = 3,
        cluster_slots: int = 256,
        swap_bytes: int | None = None,
        max_request_bytes: int | None = None,
        step_us: float | None = None,
        initial_state: str = "untouched",
        reclaim_batch: int | None = None,
        writeback_lag: int | None = None,
        zero_page: bool | None = None,
        zeromap: bool | None = None,
        stats_flush_steps: int | None = None,
        scan_priorities: bool | None = None,
        writeback_completion: str | None = None,
        write_cost: int | None = None,
        fill_write_credit: int | None = None,
        write_latency: int | None = None,
        profile: KernelProfile | str | None = None,
        source: str = "trace",
    ) -> EmulatorConfig:
        """Check every parameter against the trace's metadata (``page_bytes``, ``footprint_pages``).

        ``None`` means "the default": the kernel profile's value for ``linux``
        (:func:`~swaptrace.emulate.kernel_profile.load_profile`), off or 0 for
        ``lru``/``clock``. Raises :class:`ConfigError` naming the bad parameter.
        """
        _check_choice("policy", policy, POLICIES)
        _check_choice("readahead", readahead, READAHEAD_MODES)
        _check_choice("initial state", initial_state, INITIAL_STATES)
        if writeback_completion is not None:
            _check_choice("--writeback-completes", writeback_completion, WRITEBACK_COMPLETIONS)
        prof = profile if isinstance(profile, KernelProfile) else load_profile(profile)
        # a profile file is checked here, where the rules are known (profile.py is imported by this module)
        _check_choice(f"{prof.source}: [linux] writeback_completion", prof.linux["writeback_completion"],
                      WRITEBACK_COMPLETIONS)
        page_bytes = int(meta.get("page_bytes", 4096))
        footprint_pages = int(meta.get("footprint_pages", 0))
        if footprint_pages <= 0:
            raise ConfigError(f"{source}: metadata has no positive footprint_pages")
        # the emulator's per-page state (list links, slots, flags: about 48 bytes a page), before it is allocated
        check_allocation(footprint_pages * 48, f"{source}: emulating {footprint_pages:,} pages",
                         "the trace's footprint is too large to emulate here")
        runtime = runtime_of(meta, source)
        memory_bytes, write_cost = _process_settings(runtime, memory_bytes, write_cost)
        budget = cls.budget_pages_for(footprint_pages, page_bytes, memory_bytes=memory_bytes,
                                      memory_fraction=memory_fraction)
        if max_request_bytes is None:  # the default is never below one page (a 2 MiB-page trace)
            max_request_bytes = max(DEFAULT_MAX_REQUEST_BYTES, page_bytes)
        _check_geometry(page_cluster, cluster_slots, max_request_bytes, page_bytes, reclaim_batch)
        linux = _linux_settings(prof.linux, policy, writeback_lag=writeback_lag, zero_page=zero_page,
                                zeromap=zeromap, stats_flush_steps=stats_flush_steps, scan_priorities=scan_priorities,
                                writeback_completion=writeback_completion, write_cost=write_cost,
                                fill_write_credit=fill_write_credit, write_latency=write_latency)
        step_us = DEFAULT_STEP_US if step_us is None else step_us
        if not step_us > 0 or math.isinf(step_us):
            raise ConfigError(f"--step-us must be positive, got {step_us}")
        return cls(
            policy=policy,
            budget_pages=budget,
            batch_pages=int(reclaim_batch or POLICIES[policy].batch_pages),
            readahead=readahead,
            page_cluster=int(page_cluster),
            cluster_slots=int(cluster_slots),
            nslots=_nslots(swap_bytes, footprint_pages, page_bytes, cluster_slots),
            max_request_pages=int(max_request_bytes // page_bytes),
            page_bytes=page_bytes,
            step_us=float(step_us),
            initial_state=initial_state,
            memory_fraction=memory_fraction,
            runtime=runtime,
            **linux,
        )

    # ---- what a run records and what the kernel gets ---------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The parameters as recorded in a stream's ``params`` (bytes where the user gave bytes)."""
        d = asdict(self)
        by_level = self.writeback_completion in BY_LEVEL
        device = self.writeback_completion == "device"
        return {
            "policy": d["policy"],
            "memory_bytes": self.memory_bytes,
            "memory_fraction": d["memory_fraction"],
            "readahead": d["readahead"],
            "page_cluster": d["page_cluster"],
            "cluster_slots": d["cluster_slots"],
            "swap_bytes": self.nslots * self.page_bytes,
            "max_request_bytes": self.max_request_pages * self.page_bytes,
            "step_us": d["step_us"],
            "initial_state": d["initial_state"],
            "reclaim_batch": d["batch_pages"],
            # None with the by-level rules: their lag is not a device latency
            "writeback_lag": None if by_level else d["writeback_lag"],
            "zero_page": d["zero_page"],
            "zeromap": d["zeromap"],
            "stats_flush_steps": d["stats_flush_steps"],
            "scan_priorities": d["scan_priorities"],
            "writeback_completion": d["writeback_completion"],
            "write_cost": d["write_cost"] or None,
            "fill_write_credit": d["fill_write_credit"] if device else None,
            "write_latency": d["write_latency"] if device else None,
            "plug_rules": d["plug_rules"] and self.policy == "linux" if device else None,
        }

    @property
    def readahead_window_pages(self) -> int:
        """The most pages one fault's readahead can read (``vm.page-cluster``; VMA windows stop at 2^5)."""
        return 1 << self.page_cluster if self.readahead == "cluster" else 1 << min(self.page_cluster, 5)

    @property
    def max_rows_per_access(self) -> int:
        """A bound on the requests one access can issue (sizes the kernel's output buffer)."""
        window = self.readahead_window_pages
        # reads <= window; writes <= max(batch, window) + one isolation round of 32
        base = 2 * window + self.batch_pages + 2 * ks.SWAP_CLUSTER_MAX + 8
        if self.writeback_completion in BY_LEVEL:
            # No throttle, and an access may make any number of calls, so bound the pages instead: one
            # access writes a page at most once (a write leaves it clean, not young and with a slot, and
            # until the access's reclaim is over nothing dirties a page or brings one in), so its writes
            # are at most the pages resident when it began, at most the budget.
            return base + self.budget_pages
        # with writeback, a call writes at most lag + throttle (+ a round) pages before it waits, then
        # frees what it wrote, and one access makes at most two calls
        lag = self.writeback_lag
        wb = 2 * (lag + self.writeback_throttle + ks.SWAP_CLUSTER_MAX) if lag else 0
        return base + wb

    def kernel_params(self, *, first_step: int) -> dict[str, int]:
        """The kernel's parameter registers (:func:`~swaptrace.kernels.emulate.state.new_state`)."""
        level = self.writeback_completion in BY_LEVEL
        return {
            "policy": POLICIES[self.policy].code,
            "budget_pages": self.budget_pages,
            "batch_pages": self.batch_pages,
            "readahead": READAHEAD_MODES[self.readahead],
            "page_cluster": self.page_cluster,
            "max_request_pages": self.max_request_pages,
            "page_bytes": self.page_bytes,
            "first_step": first_step,
            "max_rows_per_access": self.max_rows_per_access,
            # the by-level rules: no write completes by the clock (a lag > 0 also keeps writes asynchronous)
            "writeback_lag": ks.WB_ALL if level else self.writeback_lag,
            "zero_page": int(self.zero_page),
            "zeromap": int(self.zeromap),
            # off with the by-level rules (their lag is WB_ALL, and lag + throttle must stay in int64)
            "writeback_throttle": 0 if level else self.writeback_throttle,
            "stats_flush_steps": self.stats_flush_steps,
            "scan_priorities": int(self.scan_priorities),
            "writeback_level": BY_LEVEL.get(self.writeback_completion, 0),
            "write_cost": self.write_cost,
            "fill_write_credit": self.fill_write_credit,
            "write_latency": self.write_latency,
            # the rules govern the device's plug, which only the linux policy's device rule has
            "plug_rules": int(self.plug_rules and self.policy == "linux" and self.writeback_completion == "device"),
        }


def _process_settings(runtime: RuntimeProfile | None, memory_bytes: int | None, write_cost: int | None):
    """A process trace's (swaptrace.workload.process): ``--memory`` is the whole group's limit, of which page cache and
    kernel memory are not the trace's, and its runtime states the device's speed unless one is given."""
    if runtime is None:
        return memory_bytes, write_cost
    if write_cost is None and runtime.write_cost:
        write_cost = runtime.write_cost
    if memory_bytes is not None:
        memory_bytes = anon_budget_bytes(memory_bytes, runtime)
    return memory_bytes, write_cost


def _check_choice(what: str, value: str, choices) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")


def _check_geometry(page_cluster: int, cluster_slots: int, max_request_bytes: int, page_bytes: int,
                    reclaim_batch: int | None) -> None:
    if not 0 <= page_cluster <= 10:
        raise ConfigError(f"--page-cluster must be in 0..10 (vm.page-cluster), got {page_cluster}")
    if cluster_slots < 1:
        raise ConfigError(f"--cluster-slots must be at least 1, got {cluster_slots}")
    if max_request_bytes < page_bytes:
        raise ConfigError(f"--max-request must be at least one page of the trace ({page_bytes} bytes), got "
                          f"{max_request_bytes}; give --max-request {page_bytes} or more")
    if reclaim_batch is not None and reclaim_batch < 1:
        raise ConfigError(f"--reclaim-batch must be at least 1, got {reclaim_batch}")


def _nslots(swap_bytes: int | None, footprint_pages: int, page_bytes: int, cluster_slots: int) -> int:
    """Slots on the swap device (header included): the footprint plus the header in whole clusters by default."""
    if swap_bytes is None:
        return -(-(footprint_pages + 1) // cluster_slots) * cluster_slots
    if swap_bytes < 0:
        raise ConfigError(f"--swap-bytes must not be negative, got {swap_bytes}")
    nslots = swap_bytes // page_bytes
    if nslots < 2:
        raise ConfigError(f"--swap-bytes {format_bytes(swap_bytes)} holds no usable slot (the first page is the header)")
    return int(nslots)


def _linux_count(flag: str, value: int | None, default: int, policy: str, elsewhere: str) -> int:
    """A non-negative count only the ``linux`` policy uses: ``default`` there when not given, 0 elsewhere."""
    if value is None:
        return default if policy == "linux" else 0
    if value < 0:
        raise ConfigError(f"{flag} must not be negative, got {value}")
    if value and policy != "linux":
        raise ConfigError(f"{flag} applies to the linux policy only; {policy} {elsewhere}")
    return int(value)


def _linux_flag(flag: str, value: bool | None, default: bool, policy: str, elsewhere: str) -> bool:
    """A switch only the ``linux`` policy uses: ``default`` there when not given, off elsewhere."""
    if value is None:
        return default and policy == "linux"
    if value and policy != "linux":
        raise ConfigError(f"{flag} applies to the linux policy only; {policy} {elsewhere}")
    return bool(value)


def _linux_settings(defaults: dict[str, Any], policy: str, *, writeback_lag, zero_page, zeromap, stats_flush_steps,
                    scan_priorities, writeback_completion, write_cost, fill_write_credit,
                    write_latency) -> dict[str, Any]:
    """The writeback and list settings, with the profile's ``defaults`` where not given."""
    lag_given = writeback_lag is not None
    lag = _linux_count("--writeback-lag", writeback_lag, defaults["writeback_lag"], policy,
                       "frees pages as it writes them")
    zero = _linux_flag("--zero-page", zero_page, defaults["zero_page"], policy, "gives every touched page a frame")
    zmap = _linux_flag("--zeromap", zeromap, defaults["zeromap"], policy, "writes and reads pages of zeros like any")
    flush = _linux_count("--stats-flush-steps", stats_flush_steps, defaults["stats_flush_steps"], policy,
                         "reads no statistics")
    levels = _linux_flag("--scan-priorities", scan_priorities, defaults["scan_priorities"], policy,
                         "evicts one page at a time")
    rule = writeback_completion
    if rule is None:  # a lag given, or 32-page rounds (no levels to complete by): the lag rule
        rule = defaults["writeback_completion"] if policy == "linux" and levels and not lag_given else "lag"
    if rule in BY_LEVEL:
        if policy != "linux":
            raise ConfigError(f"--writeback-completes {rule} applies to the linux policy only; "
                              f"{policy} frees pages as it writes them")
        if not levels:
            raise ConfigError(f"--writeback-completes {rule} needs --scan-priorities (it works by priority level)")
        if lag_given:
            raise ConfigError(f"--writeback-lag applies to --writeback-completes lag; {rule} has no lag")
        lag = 0  # no lag clock: the kernel gets WB_ALL (kernel_params)
    return {"writeback_lag": lag, "zero_page": zero, "zeromap": zmap, "stats_flush_steps": flush, "scan_priorities": levels,
            "writeback_completion": rule, "plug_rules": bool(defaults["plug_rules"]),
            **_device_settings(defaults, rule, write_cost, fill_write_credit, write_latency)}


def _device_settings(defaults: dict[str, Any], rule: str, write_cost: int | None,
                     fill_write_credit: int | None, write_latency: int | None) -> dict[str, int]:
    """``write_cost``, ``fill_write_credit`` and ``write_latency``: the profile's with the "device" rule, 0 (and
    refused) otherwise."""
    if rule != "device":
        if write_cost is not None:
            raise ConfigError(f"--write-cost applies to --writeback-completes device; {rule} does not "
                              "model the device's speed")
        if fill_write_credit:
            raise ConfigError(f"--fill-write-credit applies to --writeback-completes device; {rule} "
                              "does not model the device's time")
        if write_latency:
            raise ConfigError(f"--write-latency applies to --writeback-completes device; {rule} "
                              "does not model the device's time")
        return {"write_cost": 0, "fill_write_credit": 0, "write_latency": 0}
    cost = defaults["write_cost"] if write_cost is None else write_cost
    if cost < 1:
        raise ConfigError(f"--write-cost must be at least 1 (pages scanned per page written), got {cost}")
    credit = defaults["fill_write_credit"] if fill_write_credit is None else fill_write_credit
    if credit < 0:
        raise ConfigError(f"--fill-write-credit must not be negative, got {credit}")
    latency = defaults["write_latency"] if write_latency is None else write_latency
    if latency < 0:
        raise ConfigError(f"--write-latency must not be negative, got {latency}")
    return {"write_cost": int(cost), "fill_write_credit": int(credit), "write_latency": int(latency)}
