"""The generator's kernels: counter-based random streams and bounded Zipf (``zipf``), and the draw of a
batch of steps' lookups into page accesses (``draw``).
"""
