"""``swaptrace runtime-profile``: what a captured training program holds besides its model (a runtime profile)."""

from __future__ import annotations

import click

from swaptrace.commands.common import captured_model_input, count, echo_summary, force_option, json_option, writes
from swaptrace.core.units import format_bytes
from swaptrace.errors import ConfigError, SwaptraceError
from swaptrace.workload.spec import MAX_STEPS, load_spec

#: the options of ``swaptrace train`` read back from a captured command line
TRAIN_OPTIONS = ("--preset", "--spec", "--steps", "--seed")


#: the bounds of the captured ``train --steps/--seed`` (those of the options here and of ``train``)
_TRAIN_BOUNDS = {"--steps": (1, MAX_STEPS), "--seed": (0, (1 << 64) - 1)}


def _train_args(command: list[str] | None, capture: str, given: tuple[str, ...] = ()) -> dict[str, str | int]:
    """``--preset/--spec/--steps/--seed`` of a captured ``swaptrace train`` command line (empty if it was not one);
    the numbers checked as ``train`` checks them, in one line naming the capture, unless ``given`` here."""
    if not isinstance(command, list) or not all(isinstance(w, str) for w in command):
        raise ConfigError(f"{capture}: its command {command!r} is not a command line (a list of words)")
    if "train" not in command:
        return {}
    rest = command[command.index("train") + 1:]
    found: dict[str, str | int] = {}
    for i, word in enumerate(rest[:-1]):
        if word in TRAIN_OPTIONS:
            found[word] = rest[i + 1]
    for opt, (lo, hi) in _TRAIN_BOUNDS.items():
        if opt in found and opt not in given:
            text = str(found[opt])
            if not text.isdigit() or not lo <= int(text) <= hi:
                raise ConfigError(f"{capture}: its command line's {opt} {text!r} is not a whole number in "
                                  f"[{lo}, {hi}]; give {opt}")
            found[opt] = int(text)
    return found


@click.command("runtime-profile")
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False),
              help="Runtime profile to write (TOML), for `generate --runtime FILE`.")
@click.option("--preset", default=None, metavar="NAME", help="The model the program trained (default: read from a "
              "captured `swaptrace train` command line).")
@click.option("--spec", "spec_file", default=None, metavar="FILE.toml", help="The model's spec, instead of a preset.")
@click.option("--steps", type=count(1, MAX_STEPS), default=None, help="Steps it trained (default: the marks counted).")
@click.option("--seed", type=count(0, (1 << 64) - 1), default=None, help="Seed of its lookups (default: from the "
              "command line, else 0).")
@click.option("--name", default=None, help="The profile's name (default: the output's stem).")
@click.option("--allow-clamped", is_flag=True, help="Write the profile even if a reading contradicts the model "
              "(that field clamped to 0, a warning line each); refused otherwise.")
@force_option
@json_option
@writes(("out",), ("capture", "spec_file", "preset"), captured_model_input)
def command(*, capture, out, preset, spec_file, steps, seed, name, allow_clamped, force, as_json):
    """Derive a runtime profile from a `capture -- CMD` of a training program.

    The capture's unlimited run gives the program's memory at the end of
    start-up, its peak while training and what it referenced while training;
    the model's share of each is known from its spec, so the rest is the
    runtime's: its resident set, the part it keeps using, per-step buffers,
    page cache and kernel memory (swaptrace/workload/process.py). A short run suffices.
    A reading that contradicts the model (a capture of another model, a
    damaged reading) is refused in one line naming it, unless --allow-clamped.

    \b
    Example:
      sudo swaptrace capture --memory-fraction 0.9 -o short.swapio.parquet -- \\
          swaptrace train --spec my-model.toml --steps 10
      swaptrace runtime-profile short.swapio.parquet -o my-runtime.toml
      swaptrace generate --spec my-model.toml --runtime my-runtime.toml -o my.access.parquet
    """
    from pathlib import Path

    from swaptrace.capture.runtime_profile import derive
    from swaptrace.core.traceio import AtomicPath, open_trace
    from swaptrace.workload.process import to_toml

    tf = open_trace(capture, kind="swapio")
    meta = tf.meta
    if meta.get("source") != "kernel" or not meta.get("command"):
        raise ConfigError(f"{capture}: not a capture of a program (capture -- CMD); a runtime profile needs one")
    given = _train_args(meta.get("command"), capture,
                        tuple(o for o, v in (("--steps", steps), ("--seed", seed)) if v is not None))
    if preset is not None and spec_file is not None:
        raise ConfigError("give either --preset or --spec, not both")
    model = spec_file or preset or given.get("--spec") or given.get("--preset")
    if model is None:
        raise ConfigError(f"{capture}: its program was not `swaptrace train`; name its model with --preset or --spec")
    try:
        spec = load_spec(model)
    except SwaptraceError as exc:  # the model named on the captured command line: say where it came from
        if spec_file or preset:
            raise
        raise ConfigError(f"{capture}: the model on its command line: {exc}") from None
    n_steps = steps or int(given.get("--steps", 0)) or max(int(meta.get("steps", 1)) - 1, 1)
    if n_steps > MAX_STEPS:
        raise ConfigError(f"{capture}: {n_steps} steps is above {MAX_STEPS}; give --steps")
    n_seed = seed if seed is not None else int(given.get("--seed", 0))
    profile, notes, clamped = derive(meta.get("kernel"), spec, steps=n_steps, seed=n_seed,
                                     name=name or Path(out).stem, where=str(capture), allow_clamped=allow_clamped,
                                     measured_on=f"{Path(capture).name}: {' '.join(meta['command'])}")
    for line in clamped:
        click.echo(f"warning: {line}", err=True)
    with AtomicPath(out, force) as ap:
        ap.tmp.write_text(to_toml(profile, notes))
    summary = {"output": str(out), **{k: v for k, v in profile.to_dict().items() if k.endswith("_bytes")}}
    echo_summary(summary, as_json, lambda s: "\n".join(
        [f"wrote {s['output']}"] + [f"{k:<14} {format_bytes(v)}" for k, v in s.items() if k.endswith("_bytes")]))
