"""``swaptrace train`` says what it needs before it allocates (swaptrace.workload.train.memory_need, against
swaptrace.core.memory.memory_room), and an allocation that fails anyway is one line.

The estimate is checked against a case worked by hand and against a real run of ``tiny``; the room against
fake /proc and cgroup trees; the refusals through the command line, with the model's builder replaced by one
that fails the test if it is ever called (nothing may be allocated before the check).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli, the_error

from swaptrace.core import memory
from swaptrace.core.memory import MemoryRoom, memory_room
from swaptrace.errors import ConfigError
from swaptrace.workload.spec import spec_from_dict

try:
    import torch
except ImportError:  # the extra is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch: pip install 'swaptrace[torch]'")
REPO = Path(__file__).resolve().parent.parent
GiB, MiB = 1 << 30, 1 << 20


def hand_spec(optimizer: str):
    """Batch 4; bottom MLP 3-5-2; top MLP 4-1; table a: 10 rows, dim 2, 3 lookups; table b: 7 rows, dim 2, a bag
    of 0 or 2 rows (half each), repeats removed."""
    return spec_from_dict({
        "name": "hand", "batch_size": 4, "optimizer": optimizer, "bottom_mlp": [3, 5, 2], "top_mlp": [4, 1],
        "tables": [{"name": "a", "rows": 10, "dim": 2, "lookups": 3},
                   {"name": "b", "rows": 7, "dim": 2, "lookups": {"values": [0, 2], "probs": [0.5, 0.5]},
                    "unique_in_bag": True}]})


def test_memory_need_worked_by_hand():
    """Every term of the docstring's formula, by hand (float32 = 4 B, int64 = 8 B).

    d = 2, F = 3 tables + 1 = 3, iw = d + F(F-1)/2 = 2 + 3 = 5.
    MLP parameters: bottom 3*5+5 + 5*2+2 = 32; top (from iw) 5*4+4 + 4*1+1 = 29; P = 61, 244 B.
    Rows fed per step: a 4 * 3 = 12; b (unique, a bag of 0 or 2 rows keeps 1 row if not empty) 4 * 0.5 = 2.
    """
    from swaptrace.workload.train import memory_need

    tables = (10 + 7) * 2 * 4                                   # 136
    mlp = 61 * 4                                                # 244
    batch = 4 * 3 * 4 + 4 * 4 + (12 * 8 + 5 * 8) + (2 * 8 + 5 * 8)  # dense, labels, (rows, offsets) of a and b: 256
    activations = 4 * 4 * ((5 + 2) + 3 * 2 + 5 + (4 + 1))     # 368
    gradients = mlp + 12 * (2 * 4 + 8) + 2 * (2 * 4 + 8)       # 244 + 192 + 32 = 468
    state = {"sgd": 0, "rowwise-adagrad": 17 * 4 + mlp, "adagrad": tables + mlp, "adam": 2 * tables + 2 * mlp}
    for optimizer, st in state.items():
        need = memory_need(hand_spec(optimizer))
        assert need == {"tables": tables, "optimizer_state": st, "mlp": mlp, "batch": batch,
                        "activations": activations, "gradients": gradients,
                        "need": tables + st + mlp + batch + max(activations, gradients)}
    assert memory_need(hand_spec("adam"))["need"] == 1864


def test_check_memory_refuses_what_does_not_fit():
    from swaptrace.workload.train import check_memory, memory_need

    spec = hand_spec("adam")
    assert check_memory(spec, MemoryRoom(1864, "exactly enough"))["need"] == 1864
    with pytest.raises(ConfigError) as err:
        check_memory(spec, MemoryRoom(1863, "one byte short"))
    text = str(err.value)
    assert "\n" not in text and "1.8 KiB" in text and "one byte short" in text
    assert all(k.replace("_", " ") in text for k in memory_need(spec) if k != "need")


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


MEMINFO = "MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\nSwapFree: 102400 kB\n"  # 8 GiB, 100 MiB
V2_MOUNT = "41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"
V1_MOUNT = ("32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
            "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n")
V1_NONE = "9223372036854771712"


def test_memory_room_cgroup_v2_takes_the_tightest_level(tmp_path):
    # b: 1 GiB - 256 MiB = 768 MiB; its parent a: 768 MiB - 512 MiB = 256 MiB (tighter); swap: 100 MiB free
    root = _tree(tmp_path, {"proc/meminfo": MEMINFO, "proc/self/mountinfo": V2_MOUNT, "proc/self/cgroup": "0::/a/b\n",
                            "sys/fs/cgroup/a/b/memory.max": f"{GiB}\n", "sys/fs/cgroup/a/b/memory.current": f"{256 * MiB}\n",
                            "sys/fs/cgroup/a/b/memory.swap.max": "max\n", "sys/fs/cgroup/a/b/memory.swap.current": "0\n",
                            "sys/fs/cgroup/a/memory.max": f"{768 * MiB}\n", "sys/fs/cgroup/a/memory.current": f"{512 * MiB}\n"})
    room = memory_room(root)
    assert room.bytes == 256 * MiB + 100 * MiB and "cgroup a" in room.why
    # swap limited to 10 MiB below the group: 256 MiB + 10 MiB
    _tree(root, {"sys/fs/cgroup/a/b/memory.swap.max": f"{10 * MiB}\n"})
    assert memory_room(root).bytes == 266 * MiB


def test_memory_room_cgroup_v1_and_its_memsw(tmp_path):
    root = _tree(tmp_path, {"proc/meminfo": MEMINFO, "proc/self/mountinfo": V1_MOUNT,
                            "proc/self/cgroup": "5:cpu:/\n4:memory:/g\n0::/\n",
                            "sys/fs/cgroup/memory/g/memory.limit_in_bytes": f"{512 * MiB}\n",
                            "sys/fs/cgroup/memory/g/memory.usage_in_bytes": f"{128 * MiB}\n",
                            "sys/fs/cgroup/memory/memory.limit_in_bytes": V1_NONE,
                            "sys/fs/cgroup/memory/memory.usage_in_bytes": f"{4 * GiB}\n"})
    assert memory_room(root).bytes == 384 * MiB + 100 * MiB
    # memory+swap limited: 600 MiB - 400 MiB = 200 MiB in all
    _tree(root, {"sys/fs/cgroup/memory/g/memory.memsw.limit_in_bytes": f"{600 * MiB}\n",
                 "sys/fs/cgroup/memory/g/memory.memsw.usage_in_bytes": f"{400 * MiB}\n"})
    assert memory_room(root).bytes == 200 * MiB
    # no limit anywhere (v1's near-2^63): the machine's 8 GiB available + 100 MiB of swap
    _tree(root, {"sys/fs/cgroup/memory/g/memory.limit_in_bytes": V1_NONE,
                 "sys/fs/cgroup/memory/g/memory.memsw.limit_in_bytes": V1_NONE})
    room = memory_room(root)
    assert room.bytes == 8 * GiB + 100 * MiB and "this machine" in room.why


def test_memory_room_without_meminfo_is_physical_memory(tmp_path):
    assert memory_room(tmp_path).bytes == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_memory_room_here_is_positive():
    room = memory_room()
    assert 0 < room.bytes < 1 << 62 and room.why


# -- through the command line -------------------------------------------------------------------------------------
SPECS = {  # inside the spec's bounds, each far beyond 16 GiB
    "rows": "batch_size = 256\nbottom_mlp = [13, 16]\ntop_mlp = [8, 1]\n[[tables]]\nrows = 2147483647\ndim = 16\n",
    "batch": ("batch_size = 4194304\nbottom_mlp = [13, 512, 256, 64, 16]\ntop_mlp = [512, 256, 1]\n"
              "[[tables]]\nrows = 1000\ndim = 16\ncount = 26\n"),
    "wide": "batch_size = 256\nbottom_mlp = [13, 1048576, 1048576, 16]\ntop_mlp = [8, 1]\n[[tables]]\nrows = 1000\ndim = 16\n",
}


@pytest.fixture
def never_built(monkeypatch):
    """Fail the test if the model is ever built; a stand-in torch module when torch is not installed."""
    import swaptrace.workload.train as tr

    if torch is None:
        monkeypatch.setitem(sys.modules, "torch", type(sys)("torch"))

    def boom(*args, **kwargs):
        raise AssertionError("the model was built (allocated) before the memory check refused it")
    monkeypatch.setattr(tr, "build_model", boom)


@pytest.mark.parametrize("case", [*SPECS, "criteo-terabyte"])
def test_train_refuses_a_model_that_cannot_fit_in_one_line(tmp_path, monkeypatch, never_built, case):
    monkeypatch.setattr(memory, "memory_room", lambda root=None: MemoryRoom(16 * GiB, "a 16 GiB machine"))
    if case in SPECS:
        (tmp_path / "s.toml").write_text(SPECS[case])
        args = ["--spec", tmp_path / "s.toml"]
    else:
        args = ["--preset", case]
    line = the_error(run_cli("train", *args, "--steps", "2"))
    assert "would need at least" in line and "a 16 GiB machine" in line and "16.0 GiB" in line


def test_train_refuses_beyond_any_machine(tmp_path, never_built):
    """The machine's own room, read for real: 2^31 - 1 rows of 2^16 float32 (512 TiB) fit nowhere."""
    (tmp_path / "s.toml").write_text("batch_size = 1\nbottom_mlp = [1, 65536]\ntop_mlp = [1]\n"
                                     "[[tables]]\nrows = 2147483647\ndim = 65536\n")
    assert "512.0 TiB" in the_error(run_cli("train", "--spec", tmp_path / "s.toml", "--steps", "1"))


@needs_torch
@pytest.mark.parametrize("fail", ["torch", "numpy", "memoryerror"])
def test_an_allocation_that_fails_anyway_is_one_line(monkeypatch, fail):
    import numpy as np

    import swaptrace.workload.train as tr

    def build(spec, seed=0):
        if fail == "torch":
            torch.empty(1 << 62, dtype=torch.uint8)  # c10's DefaultCPUAllocator: RuntimeError "can't allocate"
        elif fail == "numpy":
            np.empty(1 << 62, dtype=np.uint8)  # numpy's _ArrayMemoryError
        raise MemoryError
    monkeypatch.setattr(tr, "build_model", build)
    line = the_error(run_cli("train", "--preset", "tiny", "--steps", "1"))
    assert "ran out of memory" in line
    with pytest.raises(ConfigError, match="ran out of memory"):
        tr.train("tiny", steps=1)


@needs_torch
def test_other_runtime_errors_are_not_called_memory(monkeypatch):
    import swaptrace.workload.train as tr

    def build(spec, seed=0):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)")
    monkeypatch.setattr(tr, "build_model", build)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        tr.train("tiny", steps=1)


# -- against a real run ---------------------------------------------------------------------------------------------
_REAL_RUN = r"""
import ctypes, gc, json
from swaptrace.workload.train import memory_need, train
from swaptrace.workload.spec import load_spec

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

def status(key):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key + ":"))

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
spec = load_spec("tiny")
train(spec, steps=2, seed=0, threads=1)  # the first run loads what torch loads on first use, and compiles numba's
gc.collect()
libc.malloc_trim(0)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # VmHWM := VmRSS (Linux 4.0)
free_heap, before = libc.mallinfo2().fordblks, status("VmRSS")
train(spec, steps=2, seed=0, threads=1)
print(json.dumps({"need": memory_need(spec)["need"], "free_heap": free_heap, "growth": status("VmHWM") - before}))
"""


@needs_torch
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status and glibc's mallinfo2")
def test_the_estimate_against_a_real_tiny_run():
    """A real run of ``tiny`` (2 steps, one thread) grows its peak resident set by the estimate, within bounds
    that follow from what the estimate leaves out.

    The run is the second of its process, so what torch loads on first use (``torch.optim`` imports
    ``torch._dynamo``, about 70 MiB) and numba's compilation are already resident, and the peak (``VmHWM``, reset
    by ``clear_refs`` 5) is of the model's run alone:

    * at least ``need - free_heap``: every array the estimate counts is written (tables by ``uniform_``, the
      state by ``zeros``), so it adds its pages to the resident set, unless the allocator hands out memory it
      already holds free -- at most ``free_heap``, glibc's free bytes (``mallinfo2().fordblks``) after
      ``malloc_trim(0)``;
    * at most ``need + step_bytes`` of the shipped ``pytorch-cpu`` runtime profile (35.7 MiB): what torch
      allocates in a step besides the model's arrays, measured by a capture of the same torch
      (docs/process.md).
    """
    from swaptrace.workload.process import load_runtime_profile

    try:
        import ctypes

        ctypes.CDLL(None).mallinfo2  # noqa: B018 - glibc 2.33 or later
    except (OSError, AttributeError):
        pytest.skip("needs glibc's mallinfo2")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SWAPTRACE_MARKER", None)
    out = subprocess.run([sys.executable, "-c", _REAL_RUN], capture_output=True, text=True, env=env, timeout=300,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    step_bytes = load_runtime_profile("pytorch-cpu").step_bytes
    assert got["need"] - got["free_heap"] <= got["growth"] <= got["need"] + step_bytes, got
