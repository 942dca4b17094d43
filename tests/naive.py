"""Slow, obviously-correct references for every numba kernel.

Each stage keeps its references in ``naive_<stage>.py`` beside this file;
this module gathers them so tests can ``import naive`` and compare.
"""
# ruff: noqa: F401, F403
from naive_capture import *
from naive_emulate import *
from naive_generate import *
from naive_ssd import *
