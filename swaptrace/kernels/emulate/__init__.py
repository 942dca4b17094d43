"""The emulator's state machine, one file per part of the Linux swap path it mirrors:

* ``state`` -- the three arrays and their constants; ``loop`` -- one access at a time (fault, map, reclaim);
* ``lru``, ``clock``, ``linux_lists`` (with ``dlist``) -- the residency policies' reclaim;
* ``evict`` -- swap-out of one page; ``slots`` -- the swap slot allocator (mm/swapfile.c);
* ``readahead`` -- swap readahead windows (mm/swap_state.c); ``plug`` -- block-plug merging of requests.
"""
