"""``swaptrace presets [NAME]``: list the shipped model presets or show one."""

from __future__ import annotations

import click

from swaptrace.commands.common import byte_size, echo_summary, json_option, writes
from swaptrace.core.units import format_bytes, parse_bytes
from swaptrace.workload.spec import ModelSpec, list_presets, load_spec


def preset_summary(spec: ModelSpec, page_bytes: int = 4096) -> dict:
    """Sizes of a model as ``swaptrace presets NAME`` prints them."""
    from swaptrace.workload.layout import build_layout

    layout = build_layout(spec, page_bytes)
    return {
        "name": spec.name,
        "description": spec.description,
        "tables": len(spec.tables),
        "rows": sum(t.rows for t in spec.tables),
        "batch_size": spec.batch_size,
        "optimizer": spec.optimizer,
        "lookups_per_step": spec.lookups_per_step,
        "default_steps": spec.default_steps,
        "page_bytes": page_bytes,
        "footprint_bytes": layout.footprint_bytes,
        "footprint_pages": layout.footprint_pages,
        "regions": len(layout.regions),
    }


@click.command("presets")
@click.argument("name", required=False)
@click.option("--page-bytes", type=byte_size(), default="4096", show_default=True, help="Page size for the footprint: 4096 or 2MiB.")
@click.option("--tables", "show_tables", is_flag=True, help="Also list every table.")
@json_option
@writes((), ("name",))
def command(name: str | None, page_bytes: str, show_tables: bool, as_json: bool) -> None:
    """List the model presets, or show one (NAME or a .toml file) with its footprint.

    \b
    Examples:
      swaptrace presets
      swaptrace presets criteo-kaggle --tables
      swaptrace presets my-model.toml --page-bytes 2MiB
    """
    pb = parse_bytes(page_bytes, "page-bytes")
    if name is None:
        rows = [preset_summary(load_spec(n), pb) for n in list_presets()]
        if as_json:
            echo_summary({r["name"]: r for r in rows}, True)
            return
        click.echo(f"{'preset':<16} {'tables':>6} {'batch':>6} {'optimizer':<16} {'footprint':>10}  description")
        for r in rows:
            click.echo(
                f"{r['name']:<16} {r['tables']:>6} {r['batch_size']:>6} {r['optimizer']:<16} "
                f"{format_bytes(r['footprint_bytes']):>10}  {r['description']}"
            )
        return
    spec = load_spec(name)
    summary = preset_summary(spec, pb)
    if show_tables or as_json:
        summary["table_list"] = [t.to_dict() for t in spec.tables]
    if as_json:
        echo_summary(summary, True)
        return
    tables = summary.pop("table_list", None)
    summary["footprint"] = format_bytes(summary["footprint_bytes"])
    echo_summary(summary, False)
    if tables:
        click.echo(f"\n{'table':<12} {'rows':>12} {'dim':>5} {'dtype':<9} {'alpha':>6}  lookups")
        for t in tables:
            lookups = f"1..{t['lookups']} (random)" if t.get("pooling") == "random" else str(t["lookups"])
            extras = [w for w, on in ((t.get("distribution"), "distribution" in t), ("unique", t.get("unique_in_bag")))
                      if on]
            click.echo(f"{t['name']:<12} {t['rows']:>12} {t['dim']:>5} {t['dtype']:<9} {t['alpha']:>6.3g}  {lookups}"
                       + (f"  {', '.join(extras)}" if extras else ""))
