"""Real programs whose memory behaviour swaptrace models (run them under ``swaptrace capture -- CMD``).

``torch_dlrm`` trains a DLRM in PyTorch on exactly the lookups ``swaptrace generate`` draws.
"""
