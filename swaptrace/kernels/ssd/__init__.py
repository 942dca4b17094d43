"""The SSD model's kernels: the page-mapped FTL with GC and timing (``ftl``), its sampled steady state
(``ftl_steady``) and the zoned device (``zns``).
"""
