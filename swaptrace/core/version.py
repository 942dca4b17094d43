"""The package's version, in one place: written into every output's metadata and shown by ``--version``."""

__version__ = "0.8.1"
