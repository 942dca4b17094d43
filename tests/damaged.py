"""A generator of damaged input files: each good input a user has, broken the ways files get broken.

``damage(kind, good, out_dir)`` returns ``{name: path}`` of broken copies of ``good``: cut short, of the wrong
types, out of range, of the wrong shape. The bad-input table (tests/test_bad_inputs.py) applies every one to
every reader of that kind, and tools/hostile_pass.py to every command. Made with pyarrow and text edits,
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
#: the Parquet kinds :func:`parquet_variants` damages (a capture and a process trace: a swapio and an access file
#: with the metadata sections those carry)
PARQUET_KINDS = ("access", "swapio", "fio-results", "capture", "process")


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
    """name -> f(good, out) for a Parquet file of ``kind`` (one of :data:`PARQUET_KINDS`)."""
    v: dict[str, Callable[[Path, Path], Path]] = {
        "cut-short": lambda g, o: _truncate(g, o),
        "cut-to-footer": lambda g, o: _truncate(g, o, keep=0.97),
        "meta-not-object": lambda g, o: _rewrite(g, o, change_meta=lambda m: "[1, 2]"),
        "meta-page-bytes-text": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "page_bytes": "four k"}),
        "meta-page-bytes-zero": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "page_bytes": 0}),
        "no-metadata": lambda g, o: (pq.write_table(pq.read_table(g).replace_schema_metadata({}), o), o)[1],
    }
    if kind == "fio-results":
        return v | fio_results_variants()
    if kind == "capture":
        return v | capture_variants()
    if kind == "process":
        return v | process_variants()
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


def _const(value, type_: pa.DataType | None = None) -> Callable[[pa.Array], pa.Array]:
    return lambda c: pa.array([value] * len(c), type_)


def fio_results_variants() -> dict[str, Callable[[Path, Path], Path]]:
    """name -> f(good, out) for a ``fio run`` results file (``results.parquet``, kind ``fio-results``)."""
    col = _set_column
    return {
        "iops-strings": lambda g, o: _rewrite(g, o, col("iops", lambda c: c.cast(pa.string()))),
        "iops-nan": lambda g, o: _rewrite(g, o, col("iops", _const(float("nan")))),
        "iops-inf": lambda g, o: _rewrite(g, o, col("iops", _const(float("inf")))),
        "iops-negative": lambda g, o: _rewrite(g, o, col("iops", _const(-5.0))),
        "bw-nan": lambda g, o: _rewrite(g, o, col("bw_bytes", _const(float("nan")))),
        "ios-negative": lambda g, o: _rewrite(g, o, col("ios", _const(-1, pa.int64()))),
        "ios-2^63": lambda g, o: _rewrite(g, o, col("ios", _const(1 << 63, pa.uint64()))),
        "request-bytes-zero": lambda g, o: _rewrite(g, o, col("request_bytes", _const(0, pa.uint32()))),
        "request-bytes-float": lambda g, o: _rewrite(g, o, col("request_bytes", lambda c: c.cast(pa.float64()))),
        "direction-unknown": lambda g, o: _rewrite(g, o, col("direction", _const("sideways"))),
        "instance-escapes": lambda g, o: _rewrite(g, o, col("instance", _const("../../../etc/passwd"))),
        "instance-null": lambda g, o: _rewrite(g, o, col("instance", _const(None, pa.string()))),
        "runtime-ms-inf": lambda g, o: _rewrite(g, o, col("runtime_ms", _const(float("inf")))),
        "no-rows": lambda g, o: _rewrite(g, o, lambda t: t.slice(0, 0)),
        "meta-run-text": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "run": "fast"}),
        "meta-size-text": lambda g, o: _rewrite(g, o, change_meta=lambda m: {
            **m, "run": {**m.get("run", {}), "size_bytes": "eight MiB"}}),
        "meta-size-negative": lambda g, o: _rewrite(g, o, change_meta=lambda m: {
            **m, "run": {**m.get("run", {}), "size_bytes": -8}}),
        "meta-ratios-text": lambda g, o: _rewrite(g, o, change_meta=lambda m: {**m, "ratios": "1.7"}),
    }


def _kernel(change: Callable[[dict], dict]) -> Callable[[dict], dict]:
    """A change to the ``kernel`` section of a capture's metadata."""
    return lambda m: {**m, "kernel": change(json.loads(json.dumps(m.get("kernel"))))}


def _set_in(path: tuple[str, ...], value) -> Callable[[dict], dict]:
    def change(d: dict) -> dict:
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        return d
    return change


def fake_capture(stream: Path, out: Path) -> Path:
    """``stream`` (a swapio file of ``tiny``) as a ``capture -- swaptrace train --preset tiny --steps 2`` writes it.

    The metadata carries what such a capture records: ``source = kernel``, the captured command, and the
    ``kernel`` readings of its unlimited and limited runs (start-up end, peaks, referenced memory, the two
    steps' replay and compute times), sized from the model so a runtime profile can be derived from it.
    """
    from swaptrace.capture.runtime_profile import model_bytes
    from swaptrace.workload.spec import load_spec

    mb = model_bytes(load_spec("tiny"))
    end, peak = mb["startup"] + (300 << 20), mb["startup"] + (300 << 20) + mb["lazy"] + (20 << 20)
    kernel = {"unlimited": {"startup_end": {"anon": end, "file": 0, "usage": end},
                            "peak": {"training": {"anon": peak, "file": 1 << 20, "usage": peak + (3 << 20)}},
                            "referenced": {"anon_referenced_training_bytes": 400 << 20},
                            "marks": 2,  # the steps its program marked
                            "replay_us": [1000.0, 1000.0], "compute_us": [500.0, 500.0]},  # its two steps' times
              "limited": {"peak": {"training": {"file": 2 << 20}}}}
    meta = json.loads(pq.ParquetFile(stream).metadata.metadata[META])
    meta |= {"source": "kernel", "kernel": kernel,
             "command": ["swaptrace", "train", "--preset", "tiny", "--steps", "2", "--seed", "0"]}
    pq.write_table(pq.read_table(stream).replace_schema_metadata({META: json.dumps(meta)}), out)
    return out


def capture_variants() -> dict[str, Callable[[Path, Path], Path]]:
    """name -> f(good, out) for a ``capture -- CMD`` stream (a swapio file whose metadata has ``source = kernel``,
    the captured ``command`` and the ``kernel`` readings of its runs), damaged in those readings."""
    end = ("unlimited", "startup_end", "anon")
    peak = ("unlimited", "peak", "training", "anon")
    cases: dict[str, Callable[[dict], dict]] = {
        "kernel-not-object": lambda m: {**m, "kernel": [1, 2]},
        "unlimited-text": _kernel(_set_in(("unlimited",), "yes")),
        "startup-not-object": _kernel(_set_in(("unlimited", "startup_end"), 7)),
        "anon-text": _kernel(_set_in(end, "lots")),
        "anon-nan": _kernel(_set_in(end, float("nan"))),
        "anon-inf": _kernel(_set_in(end, float("inf"))),
        "anon-negative": _kernel(_set_in(end, -4096)),
        "anon-huge": _kernel(_set_in(end, 1e300)),
        "anon-bool": _kernel(_set_in(end, True)),
        # readings in range that contradict the model (runtime-profile refuses them rather than clamp to 0)
        "anon-zero": _kernel(_set_in(end, 0)),
        "peak-below-startup": _kernel(_set_in(peak, 4096)),
        "referenced-zero": _kernel(_set_in(("unlimited", "referenced", "anon_referenced_training_bytes"), 0)),
        "marks-text": _kernel(_set_in(("unlimited", "marks"), "two")),
        "marks-fewer-than-steps": _kernel(_set_in(("unlimited", "marks"), 1)),
        "peak-text": _kernel(_set_in(peak, "x")),
        "peak-usage-text": _kernel(_set_in(("unlimited", "peak", "training", "usage"), "x")),
        "referenced-text": _kernel(_set_in(("unlimited", "referenced", "anon_referenced_training_bytes"), "x")),
        "limited-file-text": _kernel(_set_in(("limited", "peak", "training", "file"), "x")),
        "command-text": lambda m: {**m, "command": "swaptrace train"},
        "command-steps-text": lambda m: {**m, "command": ["swaptrace", "train", "--preset", "tiny", "--steps", "lots"]},
        "command-steps-huge": lambda m: {**m, "command": ["swaptrace", "train", "--preset", "tiny", "--steps",
                                                          "99999999999999999999"]},
        "command-seed-negative": lambda m: {**m, "command": ["swaptrace", "train", "--preset", "tiny", "--seed", "-1"]},
        "command-preset-unknown": lambda m: {**m, "command": ["swaptrace", "train", "--preset", "nope"]},
        "command-spec-missing": lambda m: {**m, "command": ["swaptrace", "train", "--spec", "/nonexistent/x.toml"]},
        # no --steps on the command line: the steps are the stream's own, here far too many to redraw
        # the baseline run's step times (time --compute-baseline)
        "replay-us-text": _kernel(_set_in(("unlimited", "replay_us"), "fast")),
        "replay-us-strings": _kernel(_set_in(("unlimited", "replay_us"), ["1", "2"])),
        "replay-us-nan": _kernel(_set_in(("unlimited", "replay_us"), [float("nan"), 1.0])),
        "compute-us-negative": _kernel(_set_in(("unlimited", "compute_us"), [-1.0, 1.0])),
        "compute-us-1e300": _kernel(_set_in(("unlimited", "compute_us"), [1e300, 1.0])),
        "meta-steps-huge": lambda m: {**m, "steps": (1 << 62), "command": ["swaptrace", "train", "--preset", "tiny"]},
    }
    return {k: (lambda g, o, c=c: _rewrite(g, o, change_meta=c)) for k, c in cases.items()}


def process_variants() -> dict[str, Callable[[Path, Path], Path]]:
    """name -> f(good, out) for a process trace (``generate --runtime``): its ``process`` section damaged."""
    def proc(change: Callable[[dict], dict]) -> Callable[[dict], dict]:
        return lambda m: {**m, "process": change(dict(m["process"]))}

    cases: dict[str, Callable[[dict], dict]] = {
        "process-not-object": lambda m: {**m, "process": "pytorch"},
        "process-list": lambda m: {**m, "process": [1, 2]},
        "file-bytes-text": proc(lambda p: {**p, "file_bytes": "x"}),
        "file-bytes-negative": proc(lambda p: {**p, "file_bytes": -1}),
        "kernel-bytes-huge": proc(lambda p: {**p, "kernel_bytes": 1e300}),
        "kernel-bytes-nan": proc(lambda p: {**p, "kernel_bytes": float("nan")}),
        "write-cost-text": proc(lambda p: {**p, "write_cost": "x"}),
        "write-cost-negative": proc(lambda p: {**p, "write_cost": -3}),
        "write-cost-huge": proc(lambda p: {**p, "write_cost": 1 << 62}),
        "step-offset-text": lambda m: {**m, "step_offset": "one"},
        "startup-step-negative": lambda m: {**m, "startup_step": -1},
    }
    return {k: (lambda g, o, c=c: _rewrite(g, o, change_meta=c)) for k, c in cases.items()}


def fio_run_variants() -> dict[str, Callable[[Path, Path], Path]]:
    """name -> f(good run folder, out folder) for a ``fio run`` results folder: its results file damaged (each
    :func:`fio_results_variants` and the generic ones), missing or a folder, and fio's JSON outputs
    (``raw/NAME.json``) cut short, of the wrong types or out of range."""
    def with_results(make: Callable[[Path, Path], Path]) -> Callable[[Path, Path], Path]:
        def f(g: Path, o: Path) -> Path:
            shutil.copytree(g, o)
            res = o / "results.parquet"
            tmp = o / "results.good.parquet"
            res.rename(tmp)
            make(tmp, res)
            tmp.unlink()
            return o
        return f

    def results_gone(g: Path, o: Path) -> Path:
        shutil.copytree(g, o)
        (o / "results.parquet").unlink()
        return o

    def results_folder(g: Path, o: Path) -> Path:
        results_gone(g, o)
        (o / "results.parquet").mkdir()
        return o

    def raw(change: Callable[[str], str]) -> Callable[[Path, Path], Path]:
        def f(g: Path, o: Path) -> Path:
            shutil.copytree(g, o)
            for p in sorted((o / "raw").glob("sweep_*.json")):
                p.write_text(change(p.read_text()))
            return o
        return f

    def raw_json(change: Callable[[dict], None]) -> Callable[[str], str]:
        def f(text: str) -> str:
            d = json.loads(text[text.find("{"):])
            change(d)
            return json.dumps(d)
        return f

    def job(key: str, value) -> Callable[[dict], None]:
        def f(d: dict) -> None:
            d["jobs"][0]["job options"][key] = value
        return f

    def lat(value) -> Callable[[dict], None]:
        def f(d: dict) -> None:
            for direction in ("read", "write"):
                d["jobs"][0][direction]["lat_ns"]["mean"] = value
        return f

    v: dict[str, Callable[[Path, Path], Path]] = {
        f"results-{k}": with_results(m) for k, m in parquet_variants("fio-results").items()}
    v |= {"results-missing": results_gone, "results-folder": results_folder,
          "raw-cut-short": raw(lambda t: t[: len(t) // 2]), "raw-empty": raw(lambda t: ""),
          "raw-binary": raw(lambda t: "\x00\xff junk"), "raw-not-object": raw(lambda t: "[1, 2]"),
          "raw-jobs-text": raw(raw_json(lambda d: d.__setitem__("jobs", "many"))),
          "raw-jobs-list-of-text": raw(raw_json(lambda d: d.__setitem__("jobs", ["x"]))),
          "raw-iodepth-text": raw(raw_json(job("iodepth", "deep"))),
          "raw-iodepth-huge": raw(raw_json(job("iodepth", "99999999999999999999"))),
          "raw-engine-libaio-depth-0": raw(raw_json(lambda d: (job("ioengine", "libaio")(d), job("iodepth", "0")(d)))),
          "raw-lat-text": raw(raw_json(lat("slow"))), "raw-lat-negative": raw(raw_json(lat(-5))),
          "raw-lat-1e400": raw(lambda t: raw_json(lat(1.0))(t).replace('"mean": 1.0', '"mean": 1e400')),
          "raw-lat-nan": raw(lambda t: raw_json(lat(1.0))(t).replace('"mean": 1.0', '"mean": NaN'))}
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
    """Every damaged variant of ``good`` (``kind``: one of :data:`PARQUET_KINDS`, dataset, fio-run, toml, json)
    under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind in PARQUET_KINDS:
        variants = parquet_variants(kind)
    elif kind == "dataset":
        variants = dataset_variants()
    elif kind == "fio-run":
        variants = fio_run_variants()
    else:
        variants = text_variants(kind)
    made = {}
    for name, make in variants.items():
        suffix = "" if kind in ("dataset", "fio-run") else "".join(good.suffixes[-2:]) if kind in PARQUET_KINDS \
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
