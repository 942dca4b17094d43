"""Errors a user can cause. The CLI turns each into one line and exit code 2."""


class SwaptraceError(Exception):
    """Base class: a problem with the user's input or environment, not a bug."""


class SpecError(SwaptraceError):
    """A model spec (preset or TOML file) is unknown or invalid."""


class TraceFileError(SwaptraceError):
    """A Parquet file is missing, of the wrong kind, or has the wrong columns."""


class OutputError(SwaptraceError):
    """An output path exists (without --force) or cannot be written."""


class ConfigError(SwaptraceError):
    """A parameter (size, policy, device config, ...) is out of range or unknown."""


class GCStallError(ConfigError):
    """The simulated FTL ran out of blocks to reclaim: the device has too little spare for its workload."""


class ToolError(SwaptraceError):
    """An external tool (fio, mkswap, losetup, ...) is missing or failed."""


class PrivilegeError(SwaptraceError):
    """The command needs root or a kernel facility this machine lacks."""
