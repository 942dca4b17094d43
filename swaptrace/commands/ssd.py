"""``swaptrace ssd``: the SSD model on a swap I/O stream, a synthetic pattern, or the thesis study."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from swaptrace.commands.common import (
    MAX_IODEPTH,
    MAX_SEED,
    bounded,
    byte_size,
    count,
    echo_summary,
    force_option,
    json_option,
    never_with,
    number,
    only_with,
    progressbar,
    writes,
)
from swaptrace.core.units import format_bytes, parse_bytes
from swaptrace.errors import ConfigError
from swaptrace.ssd.choices import BACKGROUND, FITS, PATTERNS, PRECONDITIONS, REAL_BACKGROUND, SWAP_PRIORS

if TYPE_CHECKING:  # names in annotations only: the modules load when the command runs
    from swaptrace.ssd import config as ssd_config
    from swaptrace.ssd.steady import Background


class SSDGroup(click.Group):
    """A group whose first argument may be a stream file: ``swaptrace ssd X.parquet`` means ``ssd replay``."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        # anything that is not a subcommand (a stream path, or replay's options first) goes to `replay`
        if args and args[0] not in self.commands:
            return super().resolve_command(ctx, ["replay", *args])
        return super().resolve_command(ctx, args)


def device_options(f):
    """Device preset plus geometry/timing/FTL overrides, shared by every ssd subcommand."""
    from swaptrace.ssd import config as ssd_config

    opts = [
        click.option("--device", default=None, show_default="mqsim-default",
                     help=f"Preset ({', '.join(ssd_config.DEVICES)}) or a TOML file of SSDConfig fields."),
        click.option("--capacity", type=byte_size(positive=True), default=None, help="User capacity (e.g. 4GiB); sets blocks per plane."),
        click.option("--op", type=bounded("op"), default=None,
                     help="Physical over-provisioning (T-U)/U, e.g. 0.07 or 0.28 (the GC reserve comes out of it)."),
        click.option("--spare-factor", type=bounded("spare_factor"), default=None,
                     help="Spare factor (T-U)/T (instead of --op)."),
        click.option("--channels", type=bounded("channels"), default=None),
        click.option("--dies-per-channel", type=bounded("dies_per_channel"), default=None),
        click.option("--planes", type=bounded("planes"), default=None),
        click.option("--blocks-per-plane", type=bounded("blocks_per_plane"), default=None),
        click.option("--pages-per-block", type=bounded("pages_per_block"), default=None),
        click.option("--page-size", type=byte_size(positive=True), default=None, help="Flash page size (e.g. 16k)."),
        click.option("--read-us", type=bounded("read_us"), default=None, help="tR, µs."),
        click.option("--program-us", type=bounded("program_us"), default=None, help="tPROG, µs."),
        click.option("--erase-us", type=bounded("erase_us"), default=None, help="tBERS, µs."),
        click.option("--channel-mb-s", type=bounded("channel_mb_s"), default=None, help="Channel rate, MB/s."),
        click.option("--host-mb-s", type=bounded("host_mb_s"), default=None, help="Host link rate, MB/s."),
        click.option("--gc", "gc_policy", type=click.Choice(list(ssd_config.GC_POLICIES)), default=None,
                     help="GC victim policy."),
        click.option("--gc-free", type=bounded("gc_free_fraction"), default=None,
                     help="GC free-block reserve: fraction of a die's blocks foreground GC keeps erased. "
                          "It comes out of --op; the output states the effective spare."),
        click.option("--bg-gc-free", type=bounded("bg_gc_free_fraction"), default=None, help="Background GC threshold (0 = off)."),
        click.option("--write-buffer", type=byte_size(), default=None, help="Device write-back buffer (e.g. 64MiB)."),
        click.option("--separate-gc-stream/--mixed-gc-stream", default=None,
                     help="Write GC-relocated (cold) data to its own frontier."),
        click.option("--hot-cold-streams/--no-hot-cold-streams", default=None,
                     help="Host-tagged cold writes (the hotcold pattern) get their own frontier."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def background_options(f):
    """The swap partition's place and the rest of the drive's background (for ``--precondition steady``)."""
    opts = [
        click.option("--fill", type=number(0, 1), default=BACKGROUND["fill"], show_default=True,
                     help="steady: fraction of the drive outside the swap partition holding data."),
        click.option("--overwritten", type=number(0, 1), default=BACKGROUND["overwritten"], show_default=True,
                     help="steady: fraction of that data overwritten at random (in steady state); the rest is "
                          "static, written once."),
        click.option("--swap-prior", type=click.Choice(SWAP_PRIORS), default=BACKGROUND["swap_prior"],
                     show_default=True,
                     help="steady: the swap partition's prior content (pool: used before, like the overwritten "
                          "data; trimmed: empty)."),
        click.option("--swap-offset", type=byte_size(), default="0", show_default=True,
                     help="Where the swap partition starts on the drive (e.g. 100GiB)."),
        *(only_with(o, "--precondition steady", why="the background of the sampled steady state")
          for o in ("--fill", "--overwritten", "--swap-prior")),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _background(fill: float, overwritten: float, swap_prior: str) -> Background:
    from swaptrace.ssd.steady import Background

    return Background(fill=fill, overwritten=overwritten, swap_prior=swap_prior)


def build_config(device: str | None, capacity: str | None, op: float | None, spare_factor: float | None,
                 **overrides: Any) -> ssd_config.SSDConfig:
    """The SSDConfig named by the device options."""
    from swaptrace.ssd import config as ssd_config

    if op is not None and spare_factor is not None:
        raise ConfigError("give --op or --spare-factor, not both")
    if device is not None and not device.strip():
        raise ConfigError(f"--device: empty; give a preset ({', '.join(ssd_config.DEVICES)}) or a .toml file")
    if spare_factor is not None and not 0.0 < spare_factor < 1.0:
        raise ConfigError(f"--spare-factor must be in (0, 1), got {spare_factor}")
    if op is not None and not op > 0:
        raise ConfigError(f"--op must be > 0, got {op}")
    fields = {
        "channels": overrides.pop("channels"), "dies_per_channel": overrides.pop("dies_per_channel"),
        "planes": overrides.pop("planes"), "blocks_per_plane": overrides.pop("blocks_per_plane"),
        "pages_per_block": overrides.pop("pages_per_block"), "page_bytes": overrides.pop("page_size"),
        "read_us": overrides.pop("read_us"), "program_us": overrides.pop("program_us"),
        "erase_us": overrides.pop("erase_us"), "channel_mb_s": overrides.pop("channel_mb_s"),
        "host_mb_s": overrides.pop("host_mb_s"), "gc_policy": overrides.pop("gc_policy"),
        "gc_free_fraction": overrides.pop("gc_free"), "bg_gc_free_fraction": overrides.pop("bg_gc_free"),
        "write_buffer_bytes": overrides.pop("write_buffer"), "separate_gc_stream": overrides.pop("separate_gc_stream"),
        "hot_cold_streams": overrides.pop("hot_cold_streams"),
        "spare_factor": spare_factor,
    }
    for key, flag in (("page_bytes", "--page-size"), ("write_buffer_bytes", "--write-buffer")):
        if fields[key] is not None:
            fields[key] = parse_bytes(fields[key], flag, positive=key == "page_bytes")
    cap = parse_bytes(capacity, "--capacity", positive=True) if capacity is not None else None
    return ssd_config.load_device(device, fields, capacity_bytes=cap, op=op)


_DEVICE_KEYS = ("device", "capacity", "op", "spare_factor", "channels", "dies_per_channel", "planes",
                "blocks_per_plane", "pages_per_block", "page_size", "read_us", "program_us", "erase_us",
                "channel_mb_s", "host_mb_s", "gc_policy", "gc_free", "bg_gc_free", "write_buffer",
                "separate_gc_stream", "hot_cold_streams")


def _split_device(kwargs: dict[str, Any]) -> ssd_config.SSDConfig:

    return build_config(**{k: kwargs.pop(k) for k in _DEVICE_KEYS})


def _render(summary: dict[str, Any]) -> str:
    lat = summary.get("latency_us") or {}
    steady = summary.get("steady_state") or {}
    nan = float("nan")

    def mb(x):
        return "n/a" if x is None else f"{x:,.1f} MB/s"

    waf = summary.get("waf")
    waf_text = "n/a" if waf is None else f"{waf:.3f} cumulative (includes the transient)"
    sw = summary.get("steady_waf") or {}
    if waf is not None and sw:
        state = "steady" if sw.get("steady") else "NOT steady"
        waf_text += f";  {sw['waf']:.3f} {state} (over the {sw['over']})"
    model = summary.get("model_waf_uniform")
    opd = summary.get("op") or {}
    sim_us = summary.get("simulated_time_us")
    time_text = "n/a (no timing)" if sim_us is None else f"{sim_us / 1e6:.3f} s"
    start = summary.get("start") or {}
    lines = [
        f"device            {summary['device']} (precondition {summary.get('precondition', '?')})",
        f"requests          {summary['requests']:,}",
        f"host written      {format_bytes(summary['host_write_bytes'])}   read {format_bytes(summary['host_read_bytes'])}"
        f"   discarded {format_bytes(summary['discard_bytes'])}",
        f"flash written     {format_bytes(summary['flash_write_bytes'])}   GC erases {summary['gc_erases']:,}",
        f"WAF               {waf_text}",
    ]
    if opd:
        lines.append(
            f"spare             physical OP {opd['physical_op']:.1%} - GC reserve {opd['gc_reserve_op']:.1%} "
            f"({opd['gc_reserve_blocks_per_die']} blocks/die) = effective OP {opd['effective_op']:.1%} "
            f"(spare factor {opd['effective_spare_factor']:.2%})")
    if model is not None:
        lines.append(f"model WAF         {model:.3f} (Desnoyers, uniform random writes over the whole drive at the "
                     "effective spare)")
    if "background" in start:
        bg = start["background"]
        lines.append(
            f"drive state       swap partition {format_bytes(start['swap_bytes'])} at "
            f"{format_bytes(start['swap_offset_bytes'])} (prior content: {bg['swap_prior']}); background fill "
            f"{bg['fill']:.0%} of the rest, {bg['overwritten']:.0%} of it overwritten at random: "
            f"{format_bytes(start['pool_bytes'])} randomly overwritten + {format_bytes(start['static_bytes'])} static "
            f"(steady state sampled in {start.get('seconds', float('nan')):.1f} s)")
    lines += [
        f"simulated time    {time_text}",
    ]
    if sim_us is not None:
        lines += [
            f"throughput        {mb(summary.get('throughput_mb_s'))}   (write {mb(summary.get('write_mb_s'))}, "
            f"read {mb(summary.get('read_mb_s'))})",
            f"bandwidth         first window {mb(summary.get('fresh_bandwidth_mb_s'))} -> last windows "
            f"{mb(steady.get('bandwidth_mb_s'))} ({'steady' if steady.get('steady') else 'not steady'})",
            f"latency (µs)      mean {lat.get('mean', nan):.1f}  p50 {lat.get('p50', nan):.1f}  "
            f"p99 {lat.get('p99', nan):.1f}  p99.9 {lat.get('p99.9', nan):.1f}",
        ]
    return "\n".join(lines)


@click.group(cls=SSDGroup, name="ssd", context_settings={"ignore_unknown_options": True})
def command() -> None:
    """Simulate an SSD (FTL, GC, write amplification, die/channel timing).

    \b
    Replay a swap I/O stream (the first argument may be the stream itself):
      swaptrace ssd traces/demo/swapio.parquet --device mqsim-default --capacity 16GiB -o traces/demo/ssd.parquet
    Synthetic pattern:
      swaptrace ssd synth --pattern randwrite --bs 4k --volume 4x --device nvme-tlc --capacity 4GiB
    The thesis's three effects:
      swaptrace ssd thesis
    """


@command.command("replay", hidden=True)
@click.argument("stream", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None,
              help="Timeline Parquet file (kind ssd-timeline).")
@device_options
@click.option("--iodepth", type=count(0, MAX_IODEPTH), default=32, show_default=True,
              help="Outstanding requests (0 = unlimited, with --timestamps).")
@click.option("--timestamps", "use_timestamps", is_flag=True, help="Issue requests no earlier than the stream's t_us.")
@click.option("--precondition", type=click.Choice(PRECONDITIONS), default="seq", show_default=True)
@click.option("--fit", type=click.Choice(FITS), default="error", show_default=True,
              help="Stream device larger than the SSD: refuse, wrap (modulo) or scale offsets.")
@click.option("--window", type=byte_size(positive=True), default=None, help="Timeline window of written bytes (default ~1/64 of the stream).")
@background_options
@click.option("--seed", type=count(0, MAX_SEED), default=0, show_default=True)
@force_option
@json_option
@writes(("out",), ("stream", "device"))
def replay_cmd(*, stream, out, iodepth, use_timestamps, precondition, fit, window, fill, overwritten, swap_prior,
               swap_offset, seed, force, as_json, **kw):
    """Replay a swap I/O stream on a simulated SSD.

    Example: swaptrace ssd traces/demo/swapio.parquet --device nvme-tlc --capacity 4GiB -o traces/demo/ssd.parquet
    """
    from swaptrace.core.traceio import open_trace
    from swaptrace.ssd import run as ssd_run

    cfg = _split_device(kw)
    window_bytes = parse_bytes(window, "--window", positive=True) if window is not None else None
    with progressbar(open_trace(stream, "swapio").num_rows, "ssd requests") as bar:
        res = ssd_run.replay(stream, cfg, out=out, iodepth=iodepth, use_timestamps=use_timestamps,
                             precondition=precondition, fit=fit, window_bytes=window_bytes, seed=seed, force=force,
                             progress=bar.update, background=_background(fill, overwritten, swap_prior),
                             swap_offset_bytes=parse_bytes(swap_offset, "--swap-offset"))
    echo_summary(res.summary, as_json, _render)


#: the most host data a synthetic run or the thesis study moves, in user capacities (SNIA PTS fills 2x)
MAX_VOLUME_FACTOR = 1000.0


def _parse_volume(text: str, user_bytes: int) -> int:
    t = text.strip().lower()
    if t.endswith("x"):
        try:
            factor = float(t[:-1])
        except ValueError:
            raise ConfigError(f"--volume: cannot read {text!r} (examples: 4x, 16GiB)") from None
        if not 0 < factor <= MAX_VOLUME_FACTOR:  # also refuses nan and inf
            raise ConfigError(f"--volume: {text!r}; give a factor in (0, {MAX_VOLUME_FACTOR}] of the user capacity")
        return max(1, int(factor * user_bytes))
    return parse_bytes(text, "--volume", positive=True)


@command.command("synth")
@click.option("--pattern", type=click.Choice(PATTERNS), required=True)
@click.option("--bs", type=byte_size(), default="4k", show_default=True, help="Request size.")
@click.option("--volume", default="4x", show_default=True, help="Host bytes to move, or Nx the user capacity.")
@device_options
@click.option("--iodepth", type=count(1, MAX_IODEPTH), default=32, show_default=True)
@click.option("--precondition", type=click.Choice(PRECONDITIONS), default="seq", show_default=True)
@click.option("--rwmix-read", type=number(0, 100), default=50.0, show_default=True, help="randrw, swap: percent reads.")
@click.option("--hot-writes", type=number(0, 1, min_open=True, max_open=True), default=0.8, show_default=True, help="hotcold: fraction of writes to hot data.")
@click.option("--hot-fraction", type=number(0, 1, min_open=True, max_open=True), default=0.2, show_default=True, help="hotcold: hot fraction of the space.")
@click.option("--no-timing", is_flag=True, help="Pure FTL (WAF only, much faster).")
@click.option("--window", type=byte_size(positive=True), default=None, help="Timeline window of written bytes.")
@background_options
@click.option("--swap-size", type=byte_size(positive=True), default=None,
              help="The partition the pattern runs on (default: the whole drive); with --precondition steady the "
                   "rest holds the background.")
@click.option("--seed", type=count(0, MAX_SEED), default=0, show_default=True)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None)
@force_option
@json_option
@only_with("--hot-writes", "--pattern hotcold")
@only_with("--hot-fraction", "--pattern hotcold")
@only_with("--rwmix-read", "--pattern randrw", "--pattern swap")
@writes(("out",), ("device",))
def synth_cmd(*, pattern, bs, volume, iodepth, precondition, rwmix_read, hot_writes, hot_fraction, no_timing, window,
              fill, overwritten, swap_prior, swap_offset, swap_size, seed, out, force, as_json, **kw):
    """Run a synthetic fio-like pattern on a simulated SSD.

    Example: swaptrace ssd synth --pattern randwrite --bs 4k --volume 4x --device nvme-tlc --capacity 4GiB --op 0.28
    """
    from swaptrace.ssd import run as ssd_run

    cfg = _split_device(kw)
    offset = parse_bytes(swap_offset, "--swap-offset")
    size = parse_bytes(swap_size, "--swap-size", positive=True) if swap_size is not None else cfg.user_bytes - offset
    region = None if (offset == 0 and swap_size is None) else (offset, size)
    volume_bytes = _parse_volume(volume, size)
    with progressbar(volume_bytes, f"ssd {pattern}") as bar:
        res = ssd_run.synth(cfg, pattern, bs_bytes=parse_bytes(bs, "--bs"), volume_bytes=volume_bytes,
                            iodepth=iodepth, precondition=precondition, rwmix_read=rwmix_read, hot_writes=hot_writes,
                            hot_fraction=hot_fraction,
                            window_bytes=parse_bytes(window, "--window", positive=True) if window is not None else None,
                            seed=seed, timing=not no_timing, out=out, force=force, progress=bar.update,
                            region=region, background=_background(fill, overwritten, swap_prior))
    echo_summary(res.summary, as_json, _render)


@command.command("thesis")
@device_options
@click.option("--iodepth", type=count(1, MAX_IODEPTH), default=8, show_default=True, help="Queue depth of the read experiment.")
@click.option("--write-iodepth", type=count(1, MAX_IODEPTH), default=32, show_default=True)
@click.option("--drive-writes", type=number(0, MAX_VOLUME_FACTOR, min_open=True), default=3.0, show_default=True,
              help="Random-write volume in user capacities.")
@click.option("--real", is_flag=True,
              help="The two ratios on the real drive (default the full nvme-tlc) in the sampled steady state of "
                   "its background, swap partition --swap-size, instead of the scaled-down study.")
@click.option("--sensitivity", is_flag=True, help="With --real: also the grid OP 7/12/28 % x fill 50/80/100 %.")
@click.option("--fill", type=number(0, 1), default=REAL_BACKGROUND["fill"], show_default=True,
              help="--real: fraction of the drive outside the swap partition holding data.")
@click.option("--overwritten", type=number(0, 1), default=REAL_BACKGROUND["overwritten"], show_default=True,
              help="--real: fraction of that data overwritten at random (steady state).")
@click.option("--swap-size", type=byte_size(positive=True), default="16GiB", show_default=True, help="--real: the swap partition.")
@click.option("--seed", type=count(0, MAX_SEED), default=0, show_default=True)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None, help="Write the JSON here.")
@force_option
@json_option
@only_with("--sensitivity", "--real")
@only_with("--fill", "--real", why="the real drive's background")
@only_with("--overwritten", "--real", why="the real drive's background")
@only_with("--swap-size", "--real", why="the real drive's swap partition")
@never_with("--drive-writes", "--real", why="the scaled-down study's volume; --real runs to steady state")
@writes(("out",), ("device",))
def thesis_cmd(*, iodepth, write_iodepth, drive_writes, real, sensitivity, fill, overwritten, swap_size, seed, out,
               force, as_json, **kw):
    """Reproduce the thesis's three SSD effects and print our ratios beside its 1.75x and 4.37x.

    Without device options it uses nvme-tlc scaled to 4 GiB with 1 MiB blocks (about a minute).
    With --real: the full drive in steady state, swap partition and background stated (about 20 s;
    --sensitivity adds the OP x fill grid, about a minute).

    Example: swaptrace ssd thesis --json -o traces/model.json
    """
    from swaptrace.core.traceio import AtomicPath
    from swaptrace.ssd import thesis as ssd_thesis
    from swaptrace.ssd.config import load_device
    from swaptrace.ssd.steady import Background

    cfg = None if all(kw[k] is None for k in _DEVICE_KEYS) else _split_device(kw)
    if out is not None:
        AtomicPath(out, force).discard()  # refuse an existing file before the minute of work
    log = None if as_json else click.echo
    if real:
        bg = Background(fill=fill, overwritten=overwritten, swap_prior="pool")
        swap_bytes = parse_bytes(swap_size, "--swap-size", positive=True)
        map_bytes = (cfg if cfg is not None else load_device(ssd_thesis.DEFAULT_DEVICE)).map_bytes  # (the full drive)
        if swap_bytes % map_bytes or swap_bytes < 1 << 20:  # the experiments' requests are up to 128 KiB
            raise ConfigError(f"--swap-size must be a multiple of {map_bytes} bytes and at least 1 MiB, got "
                              f"{swap_bytes}")
        result = ssd_thesis.thesis_real(cfg, background=bg, swap_bytes=swap_bytes, iodepth=iodepth,
                                        write_iodepth=write_iodepth, seed=seed, log=log)
        if sensitivity:
            result["sensitivity"] = ssd_thesis.sensitivity(config=cfg, overwritten=overwritten, swap_bytes=swap_bytes,
                                                           iodepth=iodepth, write_iodepth=write_iodepth, seed=seed,
                                                           log=log)
    else:
        result = ssd_thesis.run_thesis(cfg, iodepth=iodepth, write_iodepth=write_iodepth, drive_writes=drive_writes,
                                       seed=seed, log=log)
    if out is not None:
        with AtomicPath(out, force) as ap:
            ap.tmp.write_text(json.dumps(result, indent=2))
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo("")
        click.echo(ssd_thesis.render_real(result) if real else ssd_thesis.render(result))


@command.command("devices")
@json_option
def devices_cmd(as_json):
    """List the device presets with their sizes and timings.

    Example: swaptrace ssd devices
    """
    from swaptrace.ssd import config as ssd_config

    rows = {name: cfg.describe() for name, cfg in ssd_config.DEVICES.items()}
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for name, d in rows.items():
        click.echo(f"{name:<14} {format_bytes(d['user_bytes']):>10} user, OP {d['over_provisioning']:.1%} "
                   f"(GC reserve {d['gc_reserve_op']:.1%}, effective {d['effective_op']:.1%}), "
                   f"{d['channels']}ch x {d['dies_per_channel']} dies x {d['planes']} planes, "
                   f"{d['pages_per_block']} x {format_bytes(d['page_bytes'])} pages/block, tR {d['read_us']:g} µs, "
                   f"tPROG {d['program_us']:g} µs, tBERS {d['erase_us']:g} µs, GC {d['gc_policy']}")


@command.command("fit")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False),
              help="Device TOML to write (what --device takes).")
@click.option("--name", default=None, help="Device name (default: the output file's stem).")
@force_option
@writes(("out",), ("run_dir",), neither={"name": "a name written into the device TOML"})
def fit_cmd(run_dir, out, name, force):
    """Fit an SSD-model device to a `fio run` folder (read sweeps, queue depths, sequential and steady writes).

    The TOML says, per parameter, which measurement identified it and which stayed a prior.

    \b
    Example:
      swaptrace fio run fio_jobs/lab --target /dev/nvme1n1 --allow-device --steady -o fio_jobs/lab/runs/nvme1
      swaptrace ssd fit fio_jobs/lab/runs/nvme1 -o mydrive.toml
      swaptrace ssd traces/demo/swapio.parquet --device mydrive.toml
    """
    from swaptrace.ssd.fit.device import write_fit

    res = write_fit(run_dir, out, name=name, force=force, say=lambda line: click.echo(line, err=True))
    c = res.config
    click.echo(f"wrote {out}: {c.channels} channels x {c.dies_per_channel} dies, program unit "
               f"{format_bytes(c.page_bytes * c.planes)}, tR {c.read_us:.1f} us, tPROG {c.program_us:.0f} us, "
               f"channel {c.channel_mb_s:.0f} MB/s, link {c.host_mb_s:.0f} MB/s, effective OP {c.effective_op:.1%}")
    for job, err in sorted(res.residuals.items()):
        click.echo(f"  {job:<22} model / measured - 1 = {err:+.1%}")
