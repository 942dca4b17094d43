"""One-pass LRU stack distances with a Fenwick tree (Mattson et al. 1970; docs/mrc.md).

Each page's last access time holds a 1 in a Fenwick (binary indexed) tree;
the stack distance of a reuse is the number of 1s after its previous access
time, plus one. Times are renumbered (compacted) whenever the clock reaches
the tree's capacity, so memory is O(footprint pages), not O(trace length).

State (carried across chunks): ``last[page]`` (time of last access or -1),
``page_at[time]`` (page whose access is at that time, or -1), ``tree``
(1-based Fenwick array), ``reg = [now, distinct]`` and ``hist`` where
``hist[0]`` counts first accesses and ``hist[d]`` reuses at distance ``d``.

Free events (the access trace's ``event`` column, docs/formats.md) come in the
page column as ``-(page + 1)``: the page leaves the stack (its 1 leaves the
tree, the pages below it move up one place), and its next access is a first
access (``last`` = -2: freed; the SHARDS_max kernel keeps such a page in its
sample until the threshold drops past it).
"""

from __future__ import annotations

from swaptrace.kernels.jit import jit_noref


@jit_noref
def _fenwick_add(tree, i, v):
    """Add ``v`` at position ``i`` (0-based)."""
    n = tree.shape[0] - 1
    i += 1
    while i <= n:
        tree[i] += v
        i += i & (-i)


@jit_noref
def _fenwick_prefix(tree, i):
    """Sum of positions ``0..i`` (0-based, inclusive)."""
    s = 0
    i += 1
    while i > 0:
        s += tree[i]
        i -= i & (-i)
    return s


@jit_noref
def _compact(last, page_at, tree, reg):
    """Renumber the live last-access times to 0..k-1 (in order) and rebuild the tree."""
    cap = page_at.shape[0]
    k = 0
    for t in range(cap):
        p = page_at[t]
        page_at[t] = -1
        if p >= 0 and last[p] == t:
            last[p] = k
            page_at[k] = p
            k += 1
    tree[:] = 0
    n = tree.shape[0] - 1
    for i in range(1, n + 1):  # linear-time Fenwick build: ones at positions 0..k-1
        if i <= k:
            tree[i] += 1
        j = i + (i & (-i))
        if j <= n:
            tree[j] += tree[i]
    reg[0] = k


@jit_noref
def _stack_distance_one(last, page_at, tree, reg, p):
    """Access ``p`` now; return its stack distance (0 for a first access)."""
    t = last[p]
    if t >= 0 and t == reg[0] - 1:  # the most recent page again: distance 1, nothing moves
        return 1
    if reg[0] == page_at.shape[0]:
        _compact(last, page_at, tree, reg)
        t = last[p]
    now = reg[0]
    if t < 0:
        d = 0
        reg[1] += 1
    else:
        d = reg[1] - _fenwick_prefix(tree, t) + 1
        _fenwick_add(tree, t, -1)
        page_at[t] = -1
    _fenwick_add(tree, now, 1)
    last[p] = now
    page_at[now] = p
    reg[0] = now + 1
    return d


@jit_noref
def _stack_free(last, page_at, tree, reg, p):
    """Free ``p``: out of the stack (if in it); ``last[p]`` becomes -2 if it was in, else stays."""
    t = last[p]
    if t >= 0:
        _fenwick_add(tree, t, -1)
        page_at[t] = -1
        reg[1] -= 1
        last[p] = -2


@jit_noref
def _stack_chunk(pages, last, page_at, tree, reg, hist):
    """Histogram the stack distances of a chunk of page accesses (a negative entry ``-(p + 1)`` frees ``p``);
    returns the number of frees."""
    frees = 0
    for i in range(pages.shape[0]):
        p = pages[i]
        if p < 0:
            _stack_free(last, page_at, tree, reg, -p - 1)
            frees += 1
        else:
            hist[_stack_distance_one(last, page_at, tree, reg, p)] += 1
    return frees


@jit_noref
def _stack_distances(pages, last, page_at, tree, reg, out):
    """Stack distance of each access of a chunk, into ``out`` (for tests; a free's entry is -1)."""
    for i in range(pages.shape[0]):
        p = pages[i]
        if p < 0:
            _stack_free(last, page_at, tree, reg, -p - 1)
            out[i] = -1
        else:
            out[i] = _stack_distance_one(last, page_at, tree, reg, p)
