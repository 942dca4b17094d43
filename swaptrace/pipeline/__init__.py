"""The whole chain into one folder (``swaptrace run``): the stage table and its runners (``stages``), the
folder's file names (``filenames``), ``pipeline.json`` and up-to-date checks (``run``), and the report
(``report``, ``swaptrace report``).
"""
