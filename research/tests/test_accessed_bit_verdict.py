"""research/accessed_bit.py: the verdict from the runs' counts (the runs themselves need root; research/README.md)."""

from __future__ import annotations

import pytest
from research_scripts import load

accessed_bit = load("accessed_bit")


def _row(mode, hot, lost, active=0):
    return {"mode": mode, "hot_pages": hot, "hot_swapped_out_mean": lost, "active_pages_end": active,
            "major_faults": 1}


def test_hot_pages_lost_only_without_flushes_are_hidden_accesses():
    rows = [_row("none", 512, 300.0), _row("flush", 512, 0.0, 512)]
    assert accessed_bit.hidden_accesses(rows)
    assert "accesses hidden by cached translations" in accessed_bit.markdown(rows)


@pytest.mark.parametrize("none_lost, flush_lost", [(0.0, 0.0), (3.0, 0.0), (300.0, 290.0)])
def test_no_loss_a_loss_within_tolerance_or_a_loss_in_both_modes_is_not(none_lost, flush_lost):
    # 3 of 512 is 0.6 %, within the 1 % tolerance; a loss with flushes too is not the TLB's doing
    rows = [_row("none", 512, none_lost), _row("flush", 512, flush_lost)]
    assert not accessed_bit.hidden_accesses(rows)
    assert "no access hidden" in accessed_bit.markdown(rows)


def test_each_hot_set_size_is_judged_on_its_own_runs():
    rows = [_row("none", 512, 0.0), _row("flush", 512, 0.0), _row("none", 1536, 100.0), _row("flush", 1536, 0.0)]
    assert accessed_bit.hidden_accesses(rows)
    assert not accessed_bit.hidden_accesses(rows[:2] + rows[2:3])  # no flush run of 1536 to judge it against


def test_bad_hot_size_is_exit_2(capsys):
    assert accessed_bit.main(["--hot", "0"]) == 2
    assert "--hot sizes" in capsys.readouterr().err
