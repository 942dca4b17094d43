"""The names a user may choose among for the log designs, with no heavy import, so a command's options and help
can list them without loading the log's kernel (:mod:`swaptrace.designs.log` maps each to its kernel code)."""

#: --victim: which segment the cleaner empties first
VICTIM_NAMES = ("greedy", "cost-benefit")
#: --swapin: what a fault reads back
SWAPIN_NAMES = ("page", "segment")
