"""Two output folders of the same command compared field by field: did a change alter any output?

Run the same command from two checkouts into two folders (and, to learn what varies from run to run,
a second time from the first checkout), then::

    python tools/same_outputs.py OLD NEW --noise OLD2

Every file is compared: Parquet tables column by column and their ``swaptrace`` metadata key by key,
JSON key by key, text line by line, anything else byte by byte, with each folder's own path replaced by
``<DIR>`` (outputs record where they were written). A field that differs between OLD and OLD2 varies from
run to run (wall times, measured host costs) and is reported apart. Exit 0 when nothing else differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq


def _norm(value, root: str):
    if isinstance(value, str):
        return value.replace(root, "<DIR>")
    if isinstance(value, dict):
        return {k: _norm(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_norm(v, root) for v in value]
    return value


class _Column:
    """A column's values; equal when every value is (NaN equal to NaN, as a missing window's bandwidth)."""

    def __init__(self, values: np.ndarray):
        self.values = values

    def __eq__(self, other) -> bool:
        a, b = self.values, other.values
        if a.dtype.kind == "f" and b.dtype.kind == "f":
            return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
        return a.shape == b.shape and bool(np.all(a == b))


def _walk(prefix: str, a, b, out: set[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _walk(f"{prefix}.{k}", a.get(k, "<missing>"), b.get(k, "<missing>"), out)
    elif a != b and not (a != a and b != b):  # nan equals nan here
        out.add(prefix)


def fields(folder: Path) -> dict[str, object]:
    """Every file under ``folder`` as comparable parts, keyed ``relpath`` or ``relpath:part``."""
    root = str(folder.resolve())
    parts: dict[str, object] = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(folder).as_posix()
        if p.suffix == ".parquet":
            t = pq.read_table(p)
            for name in t.column_names:
                parts[f"{rel}:{name}"] = _Column(t[name].to_numpy())
            meta = (t.schema.metadata or {}).get(b"swaptrace")
            parts[f"{rel}:meta"] = _norm(json.loads(meta), root) if meta else None
        elif p.suffix == ".json":
            parts[f"{rel}:json"] = _norm(json.loads(p.read_text()), root)
        elif p.suffix in (".md", ".csv", ".toml", ".txt"):
            parts[f"{rel}:text"] = p.read_text().replace(root, "<DIR>")
        else:
            parts[f"{rel}:bytes"] = p.read_bytes()
    return parts


def differences(a: Path, b: Path) -> set[str]:
    """The fields (``file:column``, ``file:meta.key``, ...) that differ between two folders."""
    fa, fb = fields(a), fields(b)
    out: set[str] = set()
    for key in sorted(set(fa) | set(fb)):
        if key not in fa or key not in fb:
            out.add(f"{key} (only in {'the first' if key in fa else 'the second'})")
        else:
            _walk(key, fa[key], fb[key], out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--noise", type=Path, help="a second run of the old checkout: what differs run to run")
    args = ap.parse_args(argv)
    changed = differences(args.old, args.new)
    noise = differences(args.old, args.noise) if args.noise else set()
    real = sorted(changed - noise)
    print(f"{len(fields(args.old))} parts compared; {len(changed & noise)} differ as they do run to run "
          f"(noise: {len(noise)}); {len(real)} differ otherwise")
    for key in sorted(changed & noise):
        print(f"  run to run: {key}")
    for key in real:
        print(f"  CHANGED: {key}")
    return 1 if real else 0


if __name__ == "__main__":
    sys.exit(main())
