"""``swaptrace train``: train a DLRM in PyTorch or TorchRec on the lookups ``generate`` draws (a real workload to
capture)."""

from __future__ import annotations

import sys
import time

import click

from swaptrace.commands.common import MAX_SEED, echo_summary, json_option, progress_enabled, writes
from swaptrace.commands.common import count as count_type
from swaptrace.core.units import format_bytes
from swaptrace.errors import ConfigError
from swaptrace.workload.spec import MAX_STEPS, load_spec

#: the most threads the option takes (torch's own limit is the machine; this only stops typos)
MAX_THREADS = 1 << 10


class _Progress:
    """One refreshed line on a terminal, at most every half second: steps, steps/s, loss."""

    def __init__(self, steps: int):
        self.steps, self.shown = steps, 0.0

    def __call__(self, done: int, seconds: float, loss: float) -> None:
        now = time.monotonic()
        if done < self.steps and now - self.shown < 0.5:
            return
        self.shown = now
        rate = done / seconds if seconds > 0 else float("inf")
        click.echo(f"\rstep {done}/{self.steps}  {rate:.2f} steps/s  loss {loss:.4f}", file=sys.stderr,
                   nl=done == self.steps)


class _StepLines:
    """A line per step on stdout, as training scripts print (``Finished training it K/N``): what ``capture
    --record --step-line`` finds the steps of a program by when it writes no marks."""

    def __init__(self, steps: int, then=None, *, err: bool = False):
        self.steps, self.then, self.err = steps, then, err

    def __call__(self, done: int, seconds: float, loss: float) -> None:
        click.echo(f"Finished training it {done}/{self.steps} loss {loss:.4f}", err=self.err)  # flushed: a line
        if self.then is not None:
            self.then(done, seconds, loss)


@click.command("train")
@click.option("--preset", default=None, metavar="NAME", help="Model preset (see `swaptrace presets`); default tiny.")
@click.option("--spec", "spec_file", default=None, metavar="FILE.toml", help="Your own model spec instead of a preset.")
@click.option("--steps", type=count_type(1, MAX_STEPS), default=None, help="Training steps (default: the spec's default_steps).")
@click.option("--seed", type=count_type(0, MAX_SEED), default=0, show_default=True,
              help="Seed of the lookups (as generate's), dense features, labels and initial weights.")
@click.option("--framework", type=click.Choice(["pytorch", "torchrec"]), default="pytorch", show_default=True,
              help="pytorch: nn.EmbeddingBag and torch's optimizers; torchrec: TorchRec's DLRM on FBGEMM's CPU kernels "
                   "with the tables' optimizer fused (make torchrec-extra).")
@click.option("--threads", type=count_type(1, MAX_THREADS), default=None, help="Threads for torch (default: torch's).")
@click.option("--quiet", is_flag=True, help="No progress line.")
@click.option("--step-lines", is_flag=True, help="Print 'Finished training it K/N' on stdout after each step (for "
              "`capture --record --step-line` of a program that writes no marks).")
@json_option
@writes((), ("preset", "spec_file"))
def command(*, preset, spec_file, steps, seed, framework, threads, quiet, step_lines, as_json) -> None:
    """Train a DLRM in PyTorch on exactly the lookups `generate` draws for the same spec and seed.

    EmbeddingBag tables (sum, sparse gradients), the spec's bottom and top
    MLPs, DLRM's dot interaction, BCE loss and the spec's optimizer; each
    step is marked for `swaptrace capture`. Needs the torch extra. A model
    that needs more memory than this process can get is refused before
    anything is allocated. `--framework torchrec` trains the same spec with
    TorchRec's DLRM: an EmbeddingBagCollection sharded onto FBGEMM's CPU
    kernels, the tables' optimizer fused into the backward (sgd, adagrad,
    rowwise-adagrad).

    \b
    Examples:
      swaptrace train --preset tiny --steps 20
      swaptrace train --spec analysis/real_specs/kaggle-tenth-d16-sgd-zipf.toml --steps 30 --json
      swaptrace train --preset tiny --steps 20 --framework torchrec
      sudo swaptrace capture --memory 1GiB -o run.swapio.parquet -- swaptrace train --spec my.toml --steps 50
    """
    if preset is not None and spec_file is not None:
        raise ConfigError("give either --preset or --spec, not both")
    spec = load_spec(spec_file if spec_file is not None else (preset or "tiny"))  # a bad name fails before torch loads
    if framework == "torchrec":
        from swaptrace.workload.train_torchrec import check_torchrec_trainable as check_trainable
        from swaptrace.workload.train_torchrec import require_torchrec as require
        from swaptrace.workload.train_torchrec import train
    else:
        from swaptrace.workload.train import check_trainable, train
        from swaptrace.workload.train import require_torch as require
    require()
    spec = check_trainable(spec)
    n_steps = spec.default_steps if steps is None else steps
    show = not quiet and progress_enabled()
    progress = _Progress(n_steps) if show else None
    if step_lines:
        progress = _StepLines(n_steps, progress, err=as_json)  # with --json, stdout holds only the summary
    result = train(spec, steps=n_steps, seed=seed, threads=threads, progress=progress)
    summary = result.to_dict()
    if not as_json:
        summary = {**summary, **{k: f"{format_bytes(summary[k])} ({summary[k]} B)"
                                 for k in ("table_bytes", "need_bytes", "peak_rss_bytes")}}
    echo_summary(summary, as_json)
