"""CPUs kept busy beside a measured fio job: the device as a program that occupies every CPU sees it.

A swap-in's read passes through kernel work that needs a CPU of its own: a loop device's worker submits it
to the backing file (drivers/block/loop.c), the completion runs in an interrupt and then wakes the faulting
thread. On an idle machine that work finds an idle CPU at once; when the program's threads keep every CPU
busy (a training step's intra-op pool is sized to the CPUs), it waits for the scheduler to run it, and a
read's latency grows by that wait. Measured on this project's 2-CPU test machine through a loop device,
4 KiB random reads at depth 1 took 67 us with both CPUs idle, 66 us with one kept busy and 113 us with
both (docs/timing.md, "Busy CPUs"), while the faults of real training under a memory limit waited
120-130 us a read.

``swaptrace fio run --busy-cpus N`` therefore runs, beside every time-based measurement job, ``N``
processes of fio's own ``cpuio`` engine at ``cpuload=100`` (fio's HOWTO, "I/O engine": cpuio "doesn't
transfer any data, but burns CPU cycles") for as long as the measured job. The burners' section is appended
to a copy of the measured job file (:func:`combined_text`), because fio runs the jobs of one file together
but several job files given on its command line one after another. Preconditioning fills and steady-state
rounds run alone: they prepare the drive, they are not measured latencies. The burners' jobs are named
:data:`BUSY_JOB`; the results read only the measured job, and the run's record keeps what CPU the burners
got, so a profile says under which load it was measured.
"""

from __future__ import annotations

import os

from swaptrace.errors import ConfigError

#: the section name of the CPU-burning jobs (never a job name of ``swaptrace fio jobs``)
BUSY_JOB = "swaptrace_busy_cpus"

#: what the copy of a measured job file with the burners appended is called (in the run's ``raw/`` folder)
COMBINED_SUFFIX = "+busy_cpus.fio"


def combined_name(instance: str) -> str:
    """The file name of step ``instance``'s job file with the burners appended."""
    return instance + COMBINED_SUFFIX


def check_count(count: int) -> None:
    """Refuse a burner count outside 0 to the machine's CPUs (ConfigError): more would burn the measured job's CPU."""
    cpus = os.cpu_count() or 1
    if not 0 <= count <= cpus:
        raise ConfigError(f"--busy-cpus {count}: this machine has {cpus} CPU(s); give 0 to {cpus}")


def job_text(count: int) -> str:
    """The job file of ``count`` CPU burners lasting ``${SWAPTRACE_RUNTIME}`` seconds (the measured job's)."""
    if count < 1:
        raise ValueError(f"busy CPUs: {count}; at least 1")
    return (f"; {count} CPU burner(s) beside the measured job; written by `swaptrace fio run --busy-cpus`\n"
            f"[{BUSY_JOB}]\n"
            "ioengine=cpuio\n"
            "cpuload=100\n"
            f"numjobs={count}\n"
            "time_based=1\n"
            "runtime=${SWAPTRACE_RUNTIME}\n")


def combined_text(job_file_text: str, count: int) -> str:
    """A measured job file's text with ``count`` burners appended: one file, so fio starts them together."""
    return job_file_text.rstrip("\n") + "\n\n" + job_text(count)


def applies_to(job: dict) -> bool:
    """Whether a manifest job is measured with the burners beside it: a time-based job, not a fill or a round.

    A job that is not time-based (a replay, a fill) would end before the burners and leave the CPUs busy
    for nothing; preconditioning and steady-state rounds prepare the drive rather than measure it.
    """
    return bool(job.get("time_based")) and job.get("kind") not in ("precondition", "steady")


def measured_job(jobs: list[dict]) -> dict | None:
    """The first job of a fio JSON output's ``jobs`` that is not a CPU burner (None if there is none)."""
    return next((j for j in jobs if j.get("jobname") != BUSY_JOB), None)


def burner_cpu_pct(jobs: list[dict]) -> list[float]:
    """Each burner's CPU use (user + system, % of one CPU) in a fio JSON output's ``jobs``."""
    return [float(j.get("usr_cpu", 0.0)) + float(j.get("sys_cpu", 0.0)) for j in jobs if j.get("jobname") == BUSY_JOB]
