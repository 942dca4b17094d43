"""Log-structured swap's state machine (``logswap``), the kernel of ``swaptrace designs``."""
