"""The names a user may choose among for the SSD model (options and TOML), with no heavy import, so a command's
options and help can list them without loading the model."""

#: how a device is prepared before the stream (swaptrace.ssd.simulate)
PRECONDITIONS = ("none", "seq", "seq+rand", "steady")
#: synthetic request patterns (swaptrace.ssd.workloads)
PATTERNS = ("write", "read", "randwrite", "randread", "randrw", "swap", "hotcold")
#: the swap partition's prior content in a sampled steady state (swaptrace.ssd.steady)
SWAP_PRIORS = ("pool", "trimmed")
#: how a stream longer than the device's space is fitted to it (swaptrace.ssd.run)
FITS = ("error", "modulo", "scale")
#: what a drive holds outside the swap partition by default, the drive ``swaptrace run``, ``sweep`` and ``designs``
#: put a stream on (swaptrace.ssd.swapdrive): 80 % full, half of it overwritten at random (steady state), the
#: swap partition used before (its content part of the overwritten data)
BACKGROUND = {"fill": 0.8, "overwritten": 0.5, "swap_prior": "pool"}
#: the thesis's real drive: full, all of it overwritten at random (swaptrace.ssd.thesis)
REAL_BACKGROUND = {"fill": 1.0, "overwritten": 1.0, "swap_prior": "pool"}
