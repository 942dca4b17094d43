"""Pieces shared by the command modules: progress bars and common options."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

force_option = click.option("--force", is_flag=True, help="Overwrite an existing output file.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (for machines).")


def progress_enabled() -> bool:
    """Progress bars only on a terminal; quiet in pipes, CI and tests."""
    return sys.stderr.isatty()


class _NullBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int, current_item=None) -> None:
        pass


def progressbar(length: int, label: str):
    """A click progress bar on stderr, or a silent stand-in when not on a terminal.

    Library functions take a ``progress`` callback ``f(n_done_increment)``;
    pass ``bar.update``.
    """
    if progress_enabled():
        return click.progressbar(length=length, label=label, file=sys.stderr, show_pos=True)
    return _NullBar()


def echo_summary(summary: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], str] | None = None) -> None:
    """Print a summary as JSON or as aligned ``key: value`` lines."""
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return
    if render is not None:
        click.echo(render(summary))
        return
    width = max((len(k) for k in summary), default=0)
    for key, value in summary.items():
        if isinstance(value, float):
            value = f"{value:.6g}"
        click.echo(f"{key:<{width}}  {value}")
