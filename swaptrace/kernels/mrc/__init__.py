"""Miss-ratio curve kernels: exact LRU stack distances (``stack``) and SHARDS sampling (``shards``)."""
