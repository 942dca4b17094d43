"""Every mutant of ``tools/mutation.py`` still applies: its text occurs exactly once in its file.

A refactor that changes the mutated line leaves the mutant "not applied" (0 matches) and the module's kill
rate quietly over fewer mutants; this fails instead, naming the mutant to rewrite.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _mutants():
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "tools" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(name, *m) for name, (_, mutants) in module.MUTANTS.items() for m in mutants]


@pytest.mark.parametrize("name,file,old,new,description", _mutants(), ids=lambda v: v if isinstance(v, str) and
                         len(v) < 60 and "\n" not in v else None)
def test_each_mutant_applies_once(name, file, old, new, description):
    text = (ROOT / file).read_text()
    assert text.count(old) == 1, f"{name}: '{description}' matches {text.count(old)} times in {file}"
    assert old != new, f"{name}: '{description}' changes nothing"
