"""Options of another mode are refused evenly: given outside their mode, one line naming both, exit 2.

An option that only one mode of its command reads (``fio run --round`` without ``--steady``, ``ssd thesis --fill``
without ``--real``, ``capture --window`` with a TRACE) would otherwise be silently unread. Each is declared with
:func:`swaptrace.commands.common.only_with` or ``never_with`` on its command; the test walks every command's
declared rules from the CLI itself and gives each option without its mode (or with the mode it does not go
with). Options whose help says they belong to a mode (``steady: ...``, ``--real: ...``, ``-- CMD: ...``) must be
declared, or be checked by the library with the argv below, or mean something in every mode (the reason given).
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from cli_helpers import every_command
from safety_helpers import invoke, make_inputs, snapshot

from swaptrace.commands.common import ModeRule

commands = every_command


ALL = {" ".join(p): c for p, c in commands()}


def rules_of(cmd: click.Command) -> tuple[ModeRule, ...]:
    return getattr(cmd.callback, "mode_rules", ())


RULES = [(name, rule) for name, cmd in ALL.items() for rule in rules_of(cmd)]

#: help that opens by naming a mode: ``steady: ...``, ``--real: ...``, ``With --steady: ...``, ``-- CMD: ...``,
#: ``linux, --writeback-completes device: ...``
MODE_HELP = re.compile(r"^(?:With )?(?:--[a-z][a-z-]*|-- CMD|TRACE|linux|steady|hotcold|mqsim|randrw)\b[^:]{0,60}:\s")

#: options checked against their mode by the library, with an argv giving each outside it
LIBRARY_CHECKED = {
    ("emulate", "--writeback-lag"): ["--policy", "lru", "--writeback-lag", "4"],
    ("emulate", "--zero-page"): ["--policy", "lru", "--zero-page"],
    ("emulate", "--zeromap"): ["--policy", "lru", "--zeromap"],
    ("emulate", "--stats-flush-steps"): ["--policy", "lru", "--stats-flush-steps", "4"],
    ("emulate", "--scan-priorities"): ["--policy", "lru", "--scan-priorities"],
    ("emulate", "--writeback-completes"): ["--policy", "lru", "--writeback-completes", "call"],
    ("emulate", "--write-cost"): ["--writeback-completes", "lag", "--write-cost", "4"],
    ("emulate", "--fill-write-credit"): ["--writeback-completes", "lag", "--fill-write-credit", "4"],
    ("emulate", "--write-latency"): ["--writeback-completes", "lag", "--write-latency", "4"],
    ("emulate", "--ensemble"): ["--writeback-completes", "lag", "--ensemble"],
}
#: options whose help names modes but which every mode reads, with the reason
EVERY_MODE = {
    ("capture", "--memory"): "the budget of a TRACE replay, the limit of a -- CMD program: both read it",
    ("capture", "--memory-fraction"): "a share of the footprint (TRACE) or of the unlimited run's peak (-- CMD)",
}

#: the command of each rule, without any mode: {access} {stream} {jobs} are inputs, {out} a fresh folder
BASE = {
    "generate": ["generate", "--preset", "tiny", "--steps", "1", "-o", "{out}/g.access.parquet"],
    "mrc": ["mrc", "{access}", "-o", "{out}/m.csv"],
    "export": ["export", "{access}", "-o", "{out}/e.bin"],
    # capture is kept from a real capture should a rule be missing: --buffer-size 512 (under 1 KiB a CPU) is refused after the rules
    "capture": ["capture", "{access}", "-o", "{out}/k.parquet", "--memory", "1MiB", "--buffer-size", "512"],
    "ssd replay": ["ssd", "replay", "{stream}", "--capacity", "4GiB", "-o", "{out}/r.parquet"],
    "ssd synth": ["ssd", "synth", "--pattern", "randwrite", "--volume", "0.01x", "--capacity", "64MiB",
                  "--no-timing", "-o", "{out}/s.parquet"],
    "ssd thesis": ["ssd", "thesis", "--device", "nvme-tlc", "--capacity", "4GiB", "-o", "{out}/t.json"],
    "fio run": ["fio", "run", "{jobs}", "--target", "{out}/t.dat", "--size", "8MiB", "--dry-run"],
    "designs": ["designs", "{access}", "--memory-fraction", "0.5", "--device", "none", "-o", "{out}/d"],
    "time": ["time", "{stream}", "--device", "nvme-tlc", "--compute", "none", "--fault-cpu-us", "1",
             "--reclaim-cpu-us", "1", "-o", "{out}/t.parquet"],
    "run": ["run", "--preset", "tiny", "--steps", "1", "--no-thesis", "-o", "{out}/p"],
    "emulate": ["emulate", "{access}", "--memory-fraction", "0.5", "-o", "{out}/s.swapio.parquet"],
}
#: a rule's command where BASE holds its mode or another rule's: (command, option, mode) -> argv
BASE_FOR = {
    ("capture", "--window", "-- CMD"): None,  # BASE (a TRACE) is without -- CMD
    ("capture", "TRACE"): ["capture", "-o", "{out}/k.parquet", "--memory", "1MiB", "--buffer-size", "512", "--",
                           "true"],
    # without --memory (a rule of its own); no -- CMD (options follow the base), so the never-rules speak first
    ("capture", "never"): ["capture", "-o", "{out}/k.parquet", "--buffer-size", "512"],
    ("time", "never"): ["time", "{stream}", "--device", "nvme-tlc", "--fault-cpu-us", "1", "--reclaim-cpu-us", "1",
                        "-o", "{out}/t.parquet"],
}
#: a value for options and modes without a usable default
VALUE = {"--parts": "2", "--runtime": "pytorch-cpu", "--budget": "1MiB", "--trace": "{access}",
         "--fio-target": "{out}/f.dat", "--workers": "1", "--scheduler": "tcp://127.0.0.1:1",
         "--step-compute-us": "1000", "--compute-baseline": "{stream}", "--fio-runtime": "3",
         "--steps": "2", "--step-line": "Finished", "--memory-fraction": "0.5", "--swap-size": "1GiB",
         "--raw-trace": "{out}/raw.txt", "--memory": "1MiB",
         "--wait-quiet": "0.5"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_inputs(tmp_path_factory.mktemp("modes"))


def _param(cmd: click.Command, name: str) -> click.Parameter:
    for p in cmd.params:
        if name in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())) or (
                isinstance(p, click.Argument) and p.human_readable_name == name):
            return p
    raise AssertionError(f"{cmd.name}: no parameter {name}")


def _given(cmd: click.Command, text: str) -> list[str]:
    """``--opt`` with a value its command takes (a flag alone; ``--opt value`` as written)."""
    name, _, value = text.partition(" ")
    if value:
        return [name, value]
    p = _param(cmd, name)
    if getattr(p, "is_flag", False):
        return [name]
    default = p.default if p.default is not None and not callable(p.default) else None
    return [name, VALUE.get(name, str(default) if default is not None else "")]


def _argv(name: str, rule: ModeRule, mode: str | None) -> list[str]:
    cmd = ALL[name]
    if rule.without:
        base = BASE_FOR.get((name, "never"), BASE[name])
        with_mode = [] if mode in ("TRACE", "-- CMD") else _given(cmd, mode)
        args = [*base, *with_mode, *_given(cmd, rule.option)]
    elif "TRACE" in rule.modes:
        base = BASE_FOR[(name, "TRACE")]
        cut = base.index("--")
        args = [*base[:cut], *_given(cmd, rule.option), *base[cut:]]
    else:
        args = [*BASE[name], *_given(cmd, rule.option)]
    return args


def _fill(args: list[str], inputs: dict, out: Path) -> list[str]:
    values = {k: str(v) for k, v in inputs.items()} | {"out": str(out)}
    return [re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], a) for a in args]


def _cases():
    for name, rule in RULES:
        for mode in rule.modes if rule.without else (None,):
            yield pytest.param(name, rule, mode, id=f"{name} {rule.option} {'with' if rule.without else 'without'} "
                                                    f"{mode or ' or '.join(rule.modes)}")


#: every rule of the issue (so removing one fails here; a new option marked with a mode fails the test below)
EXPECTED = {
    *(("fio run", o, "--steady") for o in ("--round", "--ss-ramp", "--steady-cap", "--fill-cap", "--purge")),
    *(("ssd thesis", o, "--real") for o in ("--fill", "--overwritten", "--swap-size", "--sensitivity")),
    ("ssd thesis", "--drive-writes", "not --real"),
    *((c, o, "--precondition steady") for c in ("ssd replay", "ssd synth") for o in ("--fill", "--overwritten",
                                                                                      "--swap-prior")),
    ("ssd synth", "--hot-writes", "--pattern hotcold"), ("ssd synth", "--hot-fraction", "--pattern hotcold"),
    ("ssd synth", "--rwmix-read", "--pattern randrw"),
    *(("designs", o, "--fio-target") for o in ("--fio-size", "--fio-runtime", "--fio-requests", "--fio-repeats")),
    *(("capture", o, "TRACE") for o in ("--compute", "--lock-baseline")), ("capture", "--trace-reclaim", "not --record"),
    ("capture", "--window", "-- CMD"), ("capture", "--sample-ms", "-- CMD"), ("capture", "--record", "-- CMD"),
    ("capture", "--step-line", "--record"), ("capture", "--steps", "--record"), ("capture", "--pageout", "--record"),
    ("capture", "--wait-quiet", "not --record"), ("capture", "--quiet-timeout", "--wait-quiet"),
    *(("capture", o, "not --record") for o in ("--memory", "--memory-fraction", "--window")),
    ("time", "--trace", "--compute mlp"), ("time", "--trace", "not --step-compute-us"),
    ("generate", "--parts", "--workers"), ("generate", "--runtime", "not --workers"),
    ("mrc", "--budget", "--plot"), ("export", "--swap-offset", "--format mqsim"),
    *(("run", o, "not --no-fio") for o in ("--fio-profile", "--fio-target", "--fio-size", "--fio-runtime")),
}


def test_the_rules_are_found_from_the_cli():
    found = {(n, r.option, ("not " if r.without else "") + m) for n, r in RULES for m in r.modes}
    assert EXPECTED <= found, sorted(EXPECTED - found)
    for name, rule in RULES:  # every rule names its command's parameters
        for text in (rule.option, *rule.modes):
            if text != "-- CMD":
                _param(ALL[name], text.partition(" ")[0])


@pytest.mark.parametrize("name,rule,mode", list(_cases()))
def test_an_option_outside_its_mode_is_refused_in_one_line(inputs, tmp_path, name, rule, mode):
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(tmp_path), snapshot(inputs["base"])
    r = invoke(*_fill(_argv(name, rule, mode), inputs, out))
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for word in (rule.option, *((mode,) if mode else rule.modes)):
        assert word.partition(" ")[0] in lines[0], (word, lines[0])
    assert (snapshot(tmp_path), snapshot(inputs["base"])) == before


@pytest.mark.parametrize("key", sorted(LIBRARY_CHECKED), ids=" ".join)
def test_the_librarys_mode_checks_are_one_line_too(inputs, tmp_path, key):
    name, option = key
    before = snapshot(tmp_path)
    r = invoke(*_fill([*BASE[name], *LIBRARY_CHECKED[key]], inputs, tmp_path))
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], r.stderr
    assert snapshot(tmp_path) == before


def test_every_option_whose_help_names_a_mode_is_held_to_it():
    routed = {(n, r.option) for n, r in RULES}
    for name, cmd in ALL.items():
        for p in cmd.params:
            if isinstance(p, click.Option) and MODE_HELP.search(p.help or ""):
                key = (name, p.opts[-1] if p.opts[-1].startswith("--") else p.opts[0])
                assert key in routed or key in LIBRARY_CHECKED or key in EVERY_MODE, \
                    f"{name} {key[1]}: its help names a mode ({p.help[:40]!r}...); declare it with only_with"


def test_a_steady_cap_shorter_than_one_round_is_refused(inputs, tmp_path):
    r = invoke("fio", "run", inputs["jobs"], "--target", tmp_path / "t.dat", "--size", "8MiB", "--dry-run",
               "--steady", "--round", "60", "--steady-cap", "30")
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--steady-cap" in lines[0] and "--round" in lines[0], r.stderr
    assert not (tmp_path / "t.dat").exists()
    ok = invoke("fio", "run", inputs["jobs"], "--target", tmp_path / "t.dat", "--size", "8MiB", "--dry-run",
                "--steady", "--round", "10", "--steady-cap", "10", "--fio", "/bin/true")
    assert "--steady-cap" not in ok.output, ok.output
