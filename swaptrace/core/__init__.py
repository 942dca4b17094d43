"""Foundation every stage stands on: byte sizes, bounds of user numbers, the input and output rules,
the Parquet trace contracts (``traceio``) and block-device checks. Imports nothing above it.
"""
