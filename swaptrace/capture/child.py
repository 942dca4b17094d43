"""The replaying child: real loads and stores on anonymous memory, step by step.

Run by :mod:`swaptrace.capture.replay_process` as
``python -m swaptrace.capture.child CONFIG.json`` inside the capture's memory
cgroup. Protocol on its pipes (one line each)::

    child  -> parent   READY {"rss_bytes": ..., "warmup_s": ...}
    parent -> child    GO
    child  -> parent   DONE {"step_wall_us": [...], "model_resident_bytes": ..., ...}

and then it waits, its memory still charged, until the parent has read the
cgroup's usage and ends it.

Before ``READY`` it compiles the numba replay kernel and (with
``compute = "mlp"``) runs one MLP step, so that what the parent measures as
the baseline includes interpreter, libraries and JIT code; locks that
baseline in memory (``mlockall``, see :func:`_lock_baseline`); and then maps
the trace's footprint as anonymous memory (no page is touched yet, like the
emulator's ``initial_state="untouched"``). After ``GO`` it replays each step's accesses with
:func:`swaptrace.kernels.capture.replay.replay_codes`, writing ``swaptrace step N`` to the
tracefs marker file so requests can be attributed to steps.

A load of a never-written page maps the kernel's shared zero page (no memory
is charged); that is how a real program behaves, and the emulator's ``linux``
policy does the same (``zero_page``).
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import resource
import sys
import time

PR_SET_PDEATHSIG = 1
MCL_CURRENT, MCL_ONFAULT = 1, 4


def _release_free_heap() -> None:
    """Give the heap's free memory back to the kernel (glibc ``malloc_trim(0)``) before the baseline is measured.

    A cold numba cache compiles the replay kernel here; the compiler's freed memory stays in malloc's arenas,
    charged to the cgroup, and counts into the baseline -- measured 5 MiB high on ``demo`` and once 8 MiB
    on ``tiny``, where glibc returned it during the run and the model got twice its budget.
    """
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _lock_baseline() -> bool:
    """Pin what is resident now (and what later faults into today's mappings) in memory.

    Without this the kernel swaps out the cold part of the interpreter's and
    numba's own memory (tens of MiB) and hands that room to the model, so the
    model would get far more than its budget. ``MCL_ONFAULT`` (Linux 4.4)
    locks without populating whole mapped libraries; mappings made later --
    the model's footprint -- stay swappable. See mlockall(2).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.mlockall(MCL_CURRENT | MCL_ONFAULT) == 0
    except (OSError, AttributeError):
        return False


def _die_with_parent(parent_pid: int) -> None:
    """Get SIGKILL when the capture process dies, so a killed capture leaves no replay running."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


class MLP:
    """Dense layers with ReLU; forward, backward and an SGD update in numpy (float32).

    Sizes are a preset's ``bottom_mlp`` and ``top_mlp`` lists (input width
    first); the batch is the preset's ``batch_size``. Only the cost of the
    arithmetic matters here, so inputs and targets are fixed random arrays.

    Every buffer a step needs (activations, gradients, masks, weight updates)
    is allocated here and reused, so :meth:`step` allocates nothing. That
    matters under a memory limit: the capture measures the child's baseline
    after one step and locks it, and a step that allocated its temporaries
    anew each time (numpy frees large arrays back to the kernel) would charge
    them to the cgroup during the run and take that room from the model --
    0.7-8.8 MiB measured (``kernel.room_gain_bytes``), up to 39 % of a tight budget.
    """

    def __init__(self, layer_lists, batch_size: int, seed: int = 0):
        import numpy as np

        rng = np.random.default_rng(seed)
        self.nets = []
        for widths in layer_lists:
            widths = [int(w) for w in widths]
            if len(widths) < 2:
                continue
            ws = [(rng.standard_normal((a, b)) * (2.0 / a) ** 0.5).astype(np.float32) for a, b in zip(widths, widths[1:], strict=False)]
            x = rng.standard_normal((batch_size, widths[0])).astype(np.float32)
            acts = [x] + [np.empty((batch_size, w), np.float32) for w in widths[1:]]
            grads = [np.empty((batch_size, w), np.float32) for w in widths]
            masks = [np.empty((batch_size, w), bool) for w in widths[:-1]]
            updates = [np.empty_like(w) for w in ws]
            self.nets.append((ws, acts, grads, masks, updates))

    def step(self, lr: float = 1e-3) -> float:
        """One forward and backward pass and an SGD update of every net; returns the loss (mean square output)."""
        import numpy as np

        loss = 0.0
        for ws, acts, grads, masks, updates in self.nets:
            for i, w in enumerate(ws):
                np.matmul(acts[i], w, out=acts[i + 1])
                np.maximum(acts[i + 1], 0.0, out=acts[i + 1])
            out = acts[-1]
            loss += float(np.vdot(out, out)) / out.size
            np.multiply(out, 1.0 / out.shape[0], out=grads[-1])
            for i in range(len(ws) - 1, -1, -1):
                np.matmul(acts[i].T, grads[i + 1], out=updates[i])
                np.matmul(grads[i + 1], ws[i].T, out=grads[i])
                if i > 0:  # ReLU's derivative (the input's gradient is not needed)
                    np.less_equal(acts[i], 0.0, out=masks[i])
                    np.copyto(grads[i], 0.0, where=masks[i])
                np.multiply(updates[i], lr, out=updates[i])
                np.subtract(ws[i], updates[i], out=ws[i])
        return loss


class ResidencyProbe:
    """Counts the model's pages that hold memory, with buffers allocated (and locked) before the replay.

    ``mincore(2)`` reports a page resident when its PTE is present or, for a
    swapped-out page, when its folio is still in the swap cache -- both are
    charged to the memory cgroup. A load of a never-written page maps the
    shared zero page, which ``mincore`` reports too but which holds no memory
    of ours; those are told apart by their frame number in
    ``/proc/self/pagemap`` (root sees frame numbers). The parent subtracts the
    count from the cgroup's usage to see what the rest of the process held at
    the end of the run. It works in chunks through buffers allocated here, so
    counting at the end allocates nothing that could push a model page out.
    """

    CHUNK = 8192  # pages per mincore/pagemap call

    def __init__(self, page_bytes: int):
        import numpy as np

        self.page_bytes = page_bytes
        self.vec = np.zeros(self.CHUNK, dtype=np.uint8)
        self.entries = np.zeros(self.CHUNK, dtype=np.uint64)
        self._word = np.zeros(self.CHUNK, dtype=np.uint64)  # scratch: the count below allocates nothing
        self._res = np.zeros(self.CHUNK, dtype=bool)
        self._zero = np.zeros(self.CHUNK, dtype=bool)
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        self.zero_pfn = self._zero_page_pfn()

    def _pagemap(self, addr: int, pages: int) -> bool:
        """Read ``pages`` entries (bit 63 present, bits 0-54 frame number) for ``addr`` into ``self.entries``."""
        try:
            with open("/proc/self/pagemap", "rb", buffering=0) as fh:
                fh.seek(addr // self.page_bytes * 8)
                return fh.readinto(memoryview(self.entries[:pages]).cast("B")) == pages * 8
        except OSError:
            return False

    def _zero_page_pfn(self) -> int | None:
        probe = mmap.mmap(-1, self.page_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        try:
            probe[0]  # a load of a never-written anonymous page maps the zero page (do_anonymous_page)
            buf = (ctypes.c_char * self.page_bytes).from_buffer(probe)
            ok = self._pagemap(ctypes.addressof(buf), 1)
            del buf
        finally:
            probe.close()
        if not ok or not int(self.entries[0]) >> 63 & 1:
            return None
        return int(self.entries[0]) & ((1 << 55) - 1) or None  # 0: frame numbers hidden (no CAP_SYS_ADMIN)

    def resident_bytes(self, mem) -> int | None:
        """Bytes of ``mem`` (a numpy view of the model's mapping) resident or in the swap cache, less zero pages."""
        import numpy as np

        base, pages = mem.ctypes.data, -(-mem.nbytes // self.page_bytes)
        total = 0
        for first in range(0, pages, self.CHUNK):
            n = min(self.CHUNK, pages - first)
            addr = base + first * self.page_bytes
            if self.libc.mincore(ctypes.c_void_p(addr), n * self.page_bytes, self.vec.ctypes.data) != 0:
                return None
            vec, res, zero, word = self.vec[:n], self._res[:n], self._zero[:n], self._word[:n]
            np.not_equal(np.bitwise_and(vec, 1, out=vec), 0, out=res)
            total += int(np.count_nonzero(res))
            if self.zero_pfn is not None and self._pagemap(addr, n):  # less those mapping the zero page
                e = self.entries[:n]
                np.logical_and(res, np.equal(np.right_shift(e, np.uint64(63), out=word), 1, out=zero), out=res)
                np.equal(np.bitwise_and(e, np.uint64((1 << 55) - 1), out=word), self.zero_pfn, out=zero)
                total -= int(np.count_nonzero(np.logical_and(res, zero, out=zero)))
        return total * self.page_bytes


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _replay_steps(codes_file, buf, step_len, steps, mem, page_bytes: int, *, touch_bytes: int, mlp, mark,
                  replay) -> dict:
    """Replay every step (then the MLP, if any), timing each and counting its faults; the ``DONE`` payload.

    Times are in microseconds; faults are ``getrusage`` deltas (the replay's and the MLP's together).
    """
    before = resource.getrusage(resource.RUSAGE_SELF)
    replay_us, compute_us, wall_us = [], [], []
    step_minor, step_major = [], []
    last = before
    checksum = 0
    mark("start")
    t_run = time.perf_counter_ns()
    for k in range(len(steps)):
        chunk = buf[: int(step_len[k])]
        if codes_file.readinto(memoryview(chunk).cast("B")) != chunk.nbytes:
            raise SystemExit("codes file ended early")
        mark(f"step {int(steps[k])}")
        t0 = time.perf_counter_ns()
        checksum += int(replay(mem, chunk, page_bytes, touch_bytes))
        t1 = time.perf_counter_ns()
        if mlp is not None:
            mlp.step()
        t2 = time.perf_counter_ns()
        replay_us.append((t1 - t0) / 1e3)
        compute_us.append((t2 - t1) / 1e3)
        wall_us.append((t2 - t0) / 1e3)
        now = resource.getrusage(resource.RUSAGE_SELF)
        step_minor.append(now.ru_minflt - last.ru_minflt)
        step_major.append(now.ru_majflt - last.ru_majflt)
        last = now
        print(f"STEP {int(steps[k])}", flush=True)
    total_us = (time.perf_counter_ns() - t_run) / 1e3
    mark("end")
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "step_wall_us": wall_us,
        "replay_us": replay_us,
        "compute_us": compute_us,
        "step_minor_faults": step_minor,
        "step_major_faults": step_major,
        "total_us": total_us,
        "major_faults": after.ru_majflt - before.ru_majflt,
        "minor_faults": after.ru_minflt - before.ru_minflt,
        "max_rss_bytes": after.ru_maxrss * 1024,
        "rss_bytes": _rss_bytes(),
        "checksum": checksum,
    }


def main(config_path: str) -> int:
    with open(config_path) as fh:
        cfg = json.load(fh)
    _die_with_parent(int(cfg["parent_pid"]))
    t_start = time.perf_counter()

    import numpy as np

    from swaptrace.kernels.capture.replay import replay_codes, warm_up

    page_bytes = int(cfg["page_bytes"])
    touch_bytes = min(4096, page_bytes)
    # read() the codes step by step (no mmap: its page faults would count as major faults)
    codes_file = open(cfg["codes"], "rb")  # noqa: SIM115 - open for the whole run
    step_starts = np.load(cfg["step_starts"])
    steps = np.load(cfg["step_numbers"])
    footprint = int(cfg["footprint_bytes"])

    warm_up(page_bytes, touch_bytes)  # loads what the parent compiled (capture.replay)
    scratch = np.zeros(2 * page_bytes, dtype=np.uint8)
    # one buffer for every step's codes, allocated (and locked) before the replay: no
    # per-step allocations that would compete with the model for its budget
    step_len = np.diff(step_starts)
    buf = np.zeros(max(int(step_len.max(initial=0)), 1), dtype=np.int64)
    replay_codes(scratch, buf[:0], page_bytes, touch_bytes)
    mlp = None
    if cfg.get("compute") == "mlp":
        mlp = MLP(cfg.get("mlp_layers", []), int(cfg.get("batch_size", 128)))
        mlp.step()
    probe = ResidencyProbe(page_bytes)  # before the lock: its buffers belong to the baseline
    import gc

    gc.collect()
    _release_free_heap()
    locked = _lock_baseline() if cfg.get("lock_baseline", True) else False
    # mapped after mlockall, so the model's pages are not locked
    region = mmap.mmap(-1, max(footprint, mmap.PAGESIZE), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mem = np.frombuffer(region, dtype=np.uint8)
    marker_fd = os.open(cfg["marker"], os.O_WRONLY) if cfg.get("marker") else None

    def mark(text: str) -> None:
        if marker_fd is not None:
            os.write(marker_fd, f"swaptrace {text}\n".encode())

    print("READY " + json.dumps({"rss_bytes": _rss_bytes(), "warmup_s": time.perf_counter() - t_start,
                                        "locked": locked}), flush=True)
    if sys.stdin.readline().strip() != "GO":
        return 1

    result = _replay_steps(codes_file, buf, step_len, steps, mem, page_bytes, touch_bytes=touch_bytes, mlp=mlp,
                           mark=mark, replay=replay_codes)
    result["model_resident_bytes"] = probe.resident_bytes(mem)
    print("DONE " + json.dumps(result), flush=True)
    sys.stdin.readline()  # stay alive, pages charged, until the parent has read the cgroup's usage (then it ends us)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
