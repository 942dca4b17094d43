"""A generator of damaged input files: each good input a user has, broken the ways files get broken.

``damage(kind, good, out_dir)`` returns ``{name: path}`` of broken copies of ``good``: cut short, of the wrong
types, out of range, of the wrong shape. The bad-input table (tests/test_bad_inputs.py) applies every one to
every reader of that kind, and research/hostile_pass.py to every command. Made with pyarrow and text edits,
never with swaptrace's own writer, so a bug in the writer cannot hide one in the reader.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

META = b"swaptrace"


def _rewrite(good: Path, out: Path, change_table: Callable[[pa.Table], pa.Table] | None = None,
             change_meta: Callable[[dict], dict] | None = None) -> Path:
    """``good`` rewritten by pyarrow with its table and/or its swaptrace metadata changed."""
    table = pq.read_table(good)
    meta = json.loads(pq.ParquetFile(good).metadata.metadata[META])
    if change_table is not None:
        table = change_table(table)
    if change_meta is not None:
        meta = change_meta(meta)
    text = json.dumps(meta) if not isinstance(meta, str) else meta
    table = table.replace_schema_metadata({META: text})
    pq.write_table(table, out)
    return out


def _set_column(name: str, values: Callable[[pa.Array], pa.Array]) -> Callable[[pa.Table], pa.Table]:
    def change(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index(name)
        col = pa.concat_arrays(t.column(name).chunks) if t.num_rows else t.column(name).combine_chunks()
        new = values(col)
        return t.set_column(i, pa.field(name, new.type), new)
    return change


def _truncate(good: Path, out: Path, keep: float = 0.5) -> Path:
    data = good.read_bytes()
    out.write_bytes(data[: max(1, int(len(data) * keep))])
    return out


def parquet_variants(kind: str) -> dict[str, Callable[[Path, Path], Path]]:
    """name -> f(good, out) for a Parquet file of ``kind`` (``access`` or ``swapio``)."""
    v: dict[str, Callable[[Path, Path], Path]] = {
        "cut-short": lambda g, o: _truncate(g, o),
        "cut-to-footer": lambda g, o: _truncate(g, o, keep=0.97),
        "meta-not-object": lambda g, o: _rewrite(g, o, change_meta=lambda m: "[1, 2]"),
        "meta-page-bytes-text": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "page_bytes": "four k"}),
        "meta-page-bytes-zero": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "page_bytes": 0}),
        "no-metadata": lambda g, o: (pq.write_table(pq.read_table(g).replace_schema_metadata({}), o), o)[1],
    }
    if kind == "swapio":
        v |= {
            "t_us-strings": lambda g, o: _rewrite(g, o, _set_column("t_us", lambda c: c.cast(pa.string()))),
            "t_us-nan": lambda g, o: _rewrite(g, o, _set_column("t_us", lambda c: pa.array([float("nan")] * len(c)))),
            "offset-2^63": lambda g, o: _rewrite(g, o, _set_column(
                "offset", lambda c: pa.array([1 << 63] * len(c), pa.uint64()))),
            "offset-negative": lambda g, o: _rewrite(g, o, _set_column(
                "offset", lambda c: pa.array([-4096] * len(c), pa.int64()))),
            "op-unknown": lambda g, o: _rewrite(g, o, _set_column("op", lambda c: pa.array(["frob"] * len(c)))),
            "length-float": lambda g, o: _rewrite(g, o, _set_column("length", lambda c: c.cast(pa.float64()))),
            "meta-device-bytes-text": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "device_bytes": "x"}),
        }
    else:
        v |= {
            "page-strings": lambda g, o: _rewrite(g, o, _set_column("page", lambda c: c.cast(pa.string()))),
            "write-int": lambda g, o: _rewrite(g, o, _set_column("write", lambda c: c.cast(pa.int8()))),
            "page-past-footprint": lambda g, o: _rewrite(g, o, _set_column(
                "page", lambda c: pa.array([(1 << 40)] * len(c), pa.uint64()))),
            "meta-footprint-text": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "footprint_pages": "x"}),
            "meta-steps-negative": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "steps": -5}),
            "meta-regions-junk": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "regions": 7}),
        }
    return v


def dataset_variants() -> dict[str, Callable[[Path, Path], Path]]:
    """name -> f(good dataset folder, out folder) for a dataset folder (``generate --workers``)."""

    def part_cut(g: Path, o: Path) -> Path:
        shutil.copytree(g, o)
        part = sorted(o.glob("part-*.parquet"))[-1]
        _truncate(part, part)
        return o

    def part_gone(g: Path, o: Path) -> Path:
        shutil.copytree(g, o)
        sorted(o.glob("part-*.parquet"))[0].unlink()
        return o

    def sidecar(text: str) -> Callable[[Path, Path], Path]:
        def f(g: Path, o: Path) -> Path:
            shutil.copytree(g, o)
            (o / "_swaptrace.json").write_text(text)
            return o
        return f

    def sidecar_escape(g: Path, o: Path) -> Path:
        shutil.copytree(g, o)
        doc = json.loads((o / "_swaptrace.json").read_text())
        doc["parts"][0]["file"] = "../../etc/passwd"
        (o / "_swaptrace.json").write_text(json.dumps(doc))
        return o

    return {"part-cut-short": part_cut, "part-missing": part_gone, "sidecar-cut": sidecar('{"meta": {"kind"'),
            "sidecar-wrong-types": sidecar('{"meta": [], "parts": 3}'), "sidecar-escapes": sidecar_escape}


def text_variants(fmt: str) -> dict[str, Callable[[Path, Path], Path]]:
    """name -> f(good, out) for a TOML or JSON file: cut short, binary, and (TOML) every number made
    a string, infinite (1e400), huge (1e300) or a boolean."""
    import re

    def sub(pattern: str, repl: str) -> Callable[[Path, Path], Path]:
        def f(g: Path, o: Path) -> Path:
            o.write_text(re.sub(pattern, repl, g.read_text(), count=0, flags=re.M))
            return o
        return f

    v: dict[str, Callable[[Path, Path], Path]] = {
        "cut-short": lambda g, o: _truncate(g, o, 0.6),
        "binary": lambda g, o: (o.write_bytes(b"\x00\xff\xfe\x01 junk"), o)[1],
        "empty": lambda g, o: (o.write_bytes(b""), o)[1],
    }
    number = r"(?<=[=\[,] )(-?[0-9][0-9_.eE+-]*)(?=\s*[,\]\n])" if fmt == "toml" else r'(?<=": )(-?[0-9][0-9.eE+-]*)'
    v |= {"numbers-as-strings": sub(number, r'"\1"'), "numbers-1e400": sub(number, "1e400"),
          "numbers-1e300": sub(number, "1e300"), "numbers-true": sub(number, "true"),
          "numbers-negative": sub(number, r"-\1")}
    return v


def damage(kind: str, good: Path, out_dir: Path) -> dict[str, Path]:
    """Every damaged variant of ``good`` (``kind``: access, swapio, dataset, toml, json) under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind in ("access", "swapio"):
        variants = parquet_variants(kind)
    elif kind == "dataset":
        variants = dataset_variants()
    else:
        variants = text_variants(kind)
    made = {}
    for name, make in variants.items():
        suffix = "" if kind == "dataset" else "".join(good.suffixes[-2:]) if kind in ("access", "swapio") \
            else good.suffix
        made[name] = make(good, out_dir / f"{good.stem.split('.')[0]}-{name}{suffix}")
    return made


def make_dataset(access: Path, out: Path, parts: int = 2) -> Path:
    """A dataset folder (tests/../docs/formats.md) cut from an access trace by pyarrow: ``parts`` part files
    of whole row ranges and the ``_swaptrace.json`` sidecar listing them."""
    out.mkdir(parents=True)
    table = pq.read_table(access)
    meta = json.loads(pq.ParquetFile(access).metadata.metadata[META])
    n = table.num_rows
    cuts = [n * i // parts for i in range(parts + 1)]
    listed = []
    for i in range(parts):
        name = f"part-{i:05d}.parquet"
        piece = table.slice(cuts[i], cuts[i + 1] - cuts[i]).replace_schema_metadata({META: json.dumps(meta)})
        pq.write_table(piece, out / name)
        listed.append({"file": name, "rows": piece.num_rows})
    (out / "_swaptrace.json").write_text(json.dumps({"format": "swaptrace-dataset", "meta": meta, "parts": listed}))
    return out
