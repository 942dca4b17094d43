"""Swap designs compared on one trace and budget: Linux's stream and the fixes (docs/designs.md).

* :mod:`swaptrace.designs.log` -- design 2, aggregated log-structured swap-out (segments, cleaning);
  with zone geometry, the host side of design 3 (zoned swap);
* :mod:`swaptrace.designs.run` -- one pass: the ``linux`` run records its evictions and every log
  design replays them, so all take the same residency decisions;
* :mod:`swaptrace.designs.table` -- the table: streams, SSD model (the zoned device is
  :mod:`swaptrace.ssd.zns`), gains beside the thesis's;
* :mod:`swaptrace.designs.ondisk` -- each stream's first steps replayed by fio on a file.

Design 4 (hot rows packed together) is a generator option: ``swaptrace generate --row-layout packed``.
"""
