"""Address-space layout: page-aligned, contiguous regions of the right sizes."""

from __future__ import annotations

import pytest

from swaptrace.errors import ConfigError
from swaptrace.workload.layout import REGION_KINDS, build_layout
from swaptrace.workload.spec import load_spec, spec_from_dict


def spec(optimizer):
    return spec_from_dict({"batch_size": 3, "optimizer": optimizer, "bottom_mlp": [5, 7], "top_mlp": [2],
                           "tables": [{"name": "a", "rows": 1000, "dim": 100}, {"name": "b", "rows": 1, "dim": 1}]})


@pytest.mark.parametrize("optimizer", ["sgd", "rowwise-adagrad", "adagrad", "adam"])
@pytest.mark.parametrize("page_bytes", [4096, 2 << 20])
def test_regions_tile_the_footprint(optimizer, page_bytes):
    s = spec(optimizer)
    lay = build_layout(s, page_bytes)
    nxt = 0
    for r in lay.regions:
        assert r.first_page == nxt and r.pages >= 1 and r.kind in REGION_KINDS
        nxt += r.pages
    assert nxt == lay.footprint_pages and lay.footprint_bytes == nxt * page_bytes
    assert lay.footprint_bytes >= s.footprint_bytes
    kinds = [r.kind for r in lay.regions]
    has_state = optimizer != "sgd"
    assert kinds.count("table-state") == (2 if has_state else 0)
    assert kinds.count("mlp-state") == (1 if has_state else 0)
    assert kinds.count("table") == 2 and kinds[-1] == "scratch"
    a = lay.regions[lay.table_region[0]]
    assert a.name == "emb:a" and a.pages == -(-1000 * 400 // page_bytes)
    if has_state:
        st = lay.regions[lay.state_region[0]]
        per_row = {"rowwise-adagrad": 4, "adagrad": 400, "adam": 800}[optimizer]
        assert st.pages == -(-1000 * per_row // page_bytes) and st.name == "state:a"


def test_region_dicts_follow_the_contract():
    lay = build_layout(load_spec("tiny"))
    d = lay.region_dicts()
    assert set(d[0]) == {"name", "kind", "first_page", "pages"}
    assert len(d) == 26 * 2 + 3


def test_bad_page_size():
    with pytest.raises(ConfigError, match="page-bytes"):
        build_layout(spec("sgd"), 8192)
