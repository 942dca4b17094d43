"""The --help examples of the commands that run for tens of seconds (``LONG`` in tests/test_help_examples.py).

They run as written, as there, in a folder of their own: `make test` gives a whole file to one worker
(``--dist loadfile``), so the examples' minute or two is shared by its two workers. These examples read no
file the other file's examples or inputs make (the designs' example generates its own traces).
"""

from __future__ import annotations

import pytest
from test_help_examples import EXAMPLES, LONG, example_id, run_example

pytestmark = pytest.mark.slow  # the designs on the demo preset, the pipeline, a sweep on a Dask cluster

HERE = [(c, e) for c, e in EXAMPLES if c in LONG]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("long-examples")


def test_every_long_command_has_an_example_here():
    assert {c for c, _ in HERE} == set(LONG)


@pytest.mark.parametrize("command,line", HERE, ids=[example_id(c, e) for c, e in HERE])
def test_help_example_runs_as_written(work, monkeypatch, command, line):
    run_example(work, monkeypatch, command, line)
