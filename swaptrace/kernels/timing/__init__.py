"""The time model's kernel: one pass over a stream's requests, step by step (``steps``)."""
