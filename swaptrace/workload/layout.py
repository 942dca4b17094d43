"""Address-space layout: where each part of a model lives, in pages.

The model's memory is one virtual address space starting at page 0, split
into page-aligned regions in this order (the order a training script
allocates them: parameters first, optimizer state when the optimizer is
built, activations during the first step):

1. ``emb:<table>`` (kind ``table``) -- each table's weights, ``rows x dim``;
2. ``mlp`` (kind ``mlp``) -- bottom and top MLP weights and biases;
3. ``state:<table>`` (kind ``table-state``) -- each table's optimizer state,
   one or two arrays of ``rows x state_row_bytes`` back to back (Adam keeps
   its two moments in separate arrays); absent for SGD;
4. ``mlp-state`` (kind ``mlp-state``) -- the MLP's optimizer state; absent
   for SGD;
5. ``scratch`` (kind ``scratch``) -- activations and their gradients,
   reused every step.

Row ``r`` of a table starts at byte ``first_page * page_bytes + r * row_bytes``
and touches every page from that byte to its last byte, so a row straddles
two pages when ``row_bytes`` does not divide the page size (docs/generate.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swaptrace.errors import ConfigError
from swaptrace.workload.spec import ModelSpec

PAGE_BYTES_CHOICES = (4096, 2 << 20)
REGION_KINDS = ("table", "table-state", "mlp", "mlp-state", "scratch")


@dataclass(frozen=True)
class Region:
    """A page-aligned range of the address space."""

    name: str
    kind: str
    first_page: int
    pages: int

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "first_page": self.first_page, "pages": self.pages}


@dataclass(frozen=True)
class Layout:
    """Regions of a model in pages, plus per-table arrays the generator kernel reads.

    Attributes
    ----------
    regions : tuple of Region
        In address order; the trace's ``region`` column indexes this tuple.
    page_bytes : int
        4096 or 2 MiB.
    footprint_pages, footprint_bytes : int
        Total size (``footprint_bytes == footprint_pages * page_bytes``).
    table_first_byte, table_row_bytes : numpy int64 arrays, one per table
        Where each table's weights start and the bytes per row.
    table_region, state_region : numpy int64 arrays
        Region index of each table's weights and state (-1 without state).
    state_first_byte, state_row_bytes, state_array_bytes : numpy int64 arrays
        Start of each table's state, bytes per row of one state array, and the
        distance between the state arrays (``rows * state_row_bytes``).
    state_arrays : int
        Optimizer-state arrays per table (0 for SGD, 2 for Adam, else 1).
    mlp_region, mlp_state_region, scratch_region : int
        Region indices (-1 when absent).
    """

    regions: tuple[Region, ...]
    page_bytes: int
    footprint_pages: int
    table_first_byte: np.ndarray
    table_row_bytes: np.ndarray
    table_region: np.ndarray
    state_region: np.ndarray
    state_first_byte: np.ndarray
    state_row_bytes: np.ndarray
    state_array_bytes: np.ndarray
    state_arrays: int
    mlp_region: int
    mlp_state_region: int
    scratch_region: int

    @property
    def footprint_bytes(self) -> int:
        return self.footprint_pages * self.page_bytes

    @property
    def page_shift(self) -> int:
        return self.page_bytes.bit_length() - 1

    def region_dicts(self) -> list[dict]:
        """The ``regions`` list of the access-trace metadata."""
        return [r.to_dict() for r in self.regions]


def _pages(nbytes: int, page_bytes: int) -> int:
    return max(1, -(-nbytes // page_bytes))


def build_layout(spec: ModelSpec, page_bytes: int = 4096) -> Layout:
    """Lay a model out in page-aligned regions (see the module docstring).

    Parameters
    ----------
    spec : ModelSpec
        The model.
    page_bytes : int
        Page size: 4096 (default) or 2 MiB (transparent huge pages).

    Returns
    -------
    Layout
    """
    if page_bytes not in PAGE_BYTES_CHOICES:
        raise ConfigError(f"page-bytes: must be 4096 or 2097152 (2 MiB), got {page_bytes}")
    regions: list[Region] = []
    next_page = 0

    def add(name: str, kind: str, nbytes: int) -> int:
        nonlocal next_page
        pages = _pages(nbytes, page_bytes)
        regions.append(Region(name, kind, next_page, pages))
        next_page += pages
        return len(regions) - 1

    n = len(spec.tables)
    table_region = np.empty(n, dtype=np.int64)
    state_region = np.full(n, -1, dtype=np.int64)
    for i, t in enumerate(spec.tables):
        table_region[i] = add(f"emb:{t.name}", "table", t.weight_bytes)
    mlp_region = add("mlp", "mlp", spec.mlp_bytes)
    arrays = spec.state_arrays
    state_row = np.array([spec.state_row_bytes(t) for t in spec.tables], dtype=np.int64)
    if arrays:
        for i, t in enumerate(spec.tables):
            state_region[i] = add(f"state:{t.name}", "table-state", t.rows * int(state_row[i]) * arrays)
    mlp_state_region = add("mlp-state", "mlp-state", spec.mlp_state_bytes) if spec.mlp_state_bytes else -1
    scratch_region = add("scratch", "scratch", spec.scratch_bytes)

    first_byte = np.array([regions[r].first_page * page_bytes for r in table_region], dtype=np.int64)
    state_first = np.array(
        [regions[r].first_page * page_bytes if r >= 0 else 0 for r in state_region], dtype=np.int64
    )
    return Layout(
        regions=tuple(regions),
        page_bytes=page_bytes,
        footprint_pages=next_page,
        table_first_byte=first_byte,
        table_row_bytes=np.array([t.row_bytes for t in spec.tables], dtype=np.int64),
        table_region=table_region,
        state_region=state_region,
        state_first_byte=state_first,
        state_row_bytes=state_row,
        state_array_bytes=np.array([t.rows for t in spec.tables], dtype=np.int64) * state_row,
        state_arrays=arrays,
        mlp_region=mlp_region,
        mlp_state_region=mlp_state_region,
        scratch_region=scratch_region,
    )
