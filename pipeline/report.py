"""report.html: one self-contained page (inline CSS and SVG, no network) for people.

Charts are SVG drawn here in Python: bytes per rack, bytes per bookie, violations per
namespace (stacked by kind), violations per kind, and a rack-by-group map of stored bytes.
A tiny inline script marks each chart as rendered once the browser has laid out its
marks (`data-rendered` on <body>), which the headless-Chromium test reads.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.placement_inputs import PlacementInputs
from placement.violations import Violation

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
KIND_NAMES = [v.name or "" for v in Violation if v]


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} PiB"


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], *,
              fmt: Any = human_bytes, color: str = PALETTE[0], width: int = 900) -> str:
    """Horizontal bars, one per label (long lists: vertical columns without labels)."""
    if not labels:
        return f"<figure><figcaption>{_esc(title)}</figcaption><p>no data</p></figure>"
    top = max(values) or 1.0
    if len(labels) > 60:  # columns, labelled by hover title only
        h, bw = 220, max(1.0, (width - 60) / len(labels))
        marks = "".join(
            f'<rect class="mark" x="{50 + i * bw:.1f}" y="{h - 20 - v / top * (h - 40):.1f}" '
            f'width="{max(bw - 0.5, 0.5):.1f}" height="{v / top * (h - 40):.1f}" '
            f'fill="{color}"><title>{_esc(lab)}: {_esc(fmt(v))}</title></rect>'
            for i, (lab, v) in enumerate(zip(labels, values, strict=True)))
        axis = (f'<text x="50" y="{h - 4}" class="axis">{len(labels)} items, max '
                f'{_esc(fmt(top))}</text>')
        return _figure(title, width, h, marks + axis)
    row, left = 22, 230
    h = row * len(labels) + 10
    marks = "".join(
        f'<text x="{left - 6}" y="{i * row + 16}" text-anchor="end" class="label">'
        f'{_esc(lab[-34:])}</text>'
        f'<rect class="mark" x="{left}" y="{i * row + 4}" height="{row - 6}" '
        f'width="{max(v / top * (width - left - 140), 0.5):.1f}" fill="{color}">'
        f'<title>{_esc(lab)}: {_esc(fmt(v))}</title></rect>'
        f'<text x="{left + v / top * (width - left - 140) + 6:.1f}" y="{i * row + 16}" '
        f'class="value">{_esc(fmt(v))}</text>'
        for i, (lab, v) in enumerate(zip(labels, values, strict=True)))
    return _figure(title, width, h, marks)


def stacked_chart(title: str, rows: Sequence[Mapping[str, Any]], label: str,
                  kinds: Sequence[str], width: int = 900) -> str:
    rows = [r for r in rows if any(r.get(k) for k in kinds)]
    if not rows:
        return f"<figure><figcaption>{_esc(title)}</figcaption><p>none</p></figure>"
    row, left = 22, 230
    top = max(sum(r.get(k, 0) for k in kinds) for r in rows) or 1
    scale = (width - left - 80) / top
    marks = []
    for i, r in enumerate(rows):
        marks.append(f'<text x="{left - 6}" y="{i * row + 16}" text-anchor="end" '
                     f'class="label">{_esc(r[label])}</text>')
        x = float(left)
        for j, k in enumerate(kinds):
            v = r.get(k, 0)
            if v:
                marks.append(f'<rect class="mark" x="{x:.1f}" y="{i * row + 4}" '
                             f'width="{v * scale:.1f}" height="{row - 6}" '
                             f'fill="{PALETTE[j % len(PALETTE)]}"><title>{_esc(r[label])} '
                             f'{_esc(k)}: {v:,}</title></rect>')
                x += v * scale
        marks.append(f'<text x="{x + 6:.1f}" y="{i * row + 16}" class="value">'
                     f'{sum(r.get(k, 0) for k in kinds):,}</text>')
    legend = "".join(
        f'<span class="key"><i style="background:{PALETTE[j % len(PALETTE)]}"></i>'
        f'{_esc(k)}</span>' for j, k in enumerate(kinds)
        if any(r.get(k) for r in rows))
    return _figure(title, width, row * len(rows) + 10, "".join(marks), legend)


def heat_map(title: str, racks: Sequence[str], groups: Sequence[str],
             cells: Mapping[tuple[str, str], tuple[int, float]]) -> str:
    """Rack rows x group columns; shade = stored bytes, text = bookies."""
    cw, ch, left, head = 110, 24, 160, 28
    top = max((v[1] for v in cells.values()), default=0.0) or 1.0
    parts = [f'<text x="{left + j * cw + cw / 2}" y="18" text-anchor="middle" '
             f'class="label">{_esc(g)}</text>' for j, g in enumerate(groups)]
    for i, rack in enumerate(racks):
        y = head + i * ch
        parts.append(f'<text x="{left - 6}" y="{y + 16}" text-anchor="end" '
                     f'class="label">{_esc(rack)}</text>')
        for j, g in enumerate(groups):
            n, nbytes = cells.get((rack, g), (0, 0.0))
            alpha = 0.08 + 0.92 * nbytes / top if n else 0.0
            parts.append(
                f'<rect class="mark" x="{left + j * cw}" y="{y}" width="{cw - 2}" '
                f'height="{ch - 2}" fill="{PALETTE[0]}" fill-opacity="{alpha:.2f}" '
                f'stroke="#ccc"><title>{_esc(rack)} / {_esc(g)}: {n} bookies, '
                f'{_esc(human_bytes(nbytes))}</title></rect>'
                f'<text x="{left + j * cw + cw / 2}" y="{y + 16}" text-anchor="middle" '
                f'class="cell">{n or ""}</text>')
    return _figure(title, left + cw * len(groups) + 10, head + ch * len(racks) + 6,
                   "".join(parts), "shade: stored bytes; number: bookies")


def _figure(title: str, width: float, height: float, body: str, legend: str = "") -> str:
    return (f'<figure><figcaption>{_esc(title)}</figcaption>'
            f'<svg class="chart" role="img" aria-label="{_esc(title)}" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">'
            f'<title>{_esc(title)}</title>{body}</svg>'
            + (f'<div class="legend">{legend}</div>' if legend else "") + "</figure>")


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
figure{margin:12px 0 20px}figcaption{font-weight:600;margin-bottom:4px}
svg .label,svg .value,svg .axis,svg .cell{font-size:12px;fill:#333}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left}th{background:#f4f4f4}.legend .key{margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.figures{display:flex;gap:18px;flex-wrap:wrap}.big{font-size:20px;font-weight:600}
"""

SCRIPT = """
addEventListener('load',()=>{let n=0;for(const s of document.querySelectorAll('svg.chart')){
const b=s.getBBox();if(b.width>0&&b.height>0&&s.querySelector('.mark'))n++}
document.body.dataset.rendered=n+'/'+document.querySelectorAll('svg.chart').length});
"""


def render_report(summary: Mapping[str, Any], aggregates: Sequence[Mapping[str, Any]],
                  namespaces: Sequence[Mapping[str, Any]],
                  reasons: Counter[str], cluster: PlacementInputs) -> str:
    """The page; `reasons` counts the unfixable fragments by "kinds: reason"."""
    by_dim: dict[str, list[Mapping[str, Any]]] = {}
    for a in aggregates:
        by_dim.setdefault(a["dim"], []).append(a)
    racks = sorted(by_dim.get("rack", []), key=lambda a: a["name"])
    bookies = sorted(by_dim.get("bookie", []), key=lambda a: a["key"])
    kinds = summary.get("violations_by_kind", {})
    cells: dict[tuple[str, str], tuple[int, float]] = {}
    bytes_of = {a["key"]: a["bytes"] for a in bookies}
    for i, b in enumerate(cluster.bookie_ids):
        key = (cluster.topology.rack_of(b), cluster.topology.group_of.get(b) or "(no group)")
        n, nb = cells.get(key, (0, 0.0))
        cells[key] = (n + 1, nb + bytes_of.get(i, 0.0))
    rack_names = sorted({k[0] for k in cells})
    group_names = sorted({k[1] for k in cells})
    plan = summary.get("plan", {})
    skew_rows = [(d, s.get("count", 0), f"{s.get('max_over_mean', 0):.2f}",
                  f"{s.get('cv', 0):.3f}") for d, s in summary.get("skew", {}).items()]
    facts = [("fragments", f"{summary['fragments']:,}"), ("ledgers", f"{summary['ledgers']:,}"),
             ("violating fragments", f"{summary['violating_fragments']:,}"),
             ("violating ledgers", f"{summary['violating_ledgers']:,}"),
             ("placement mode", summary["placement_mode"]),
             ("planned moves", f"{plan.get('moves', 0):,}"),
             ("bytes to move", human_bytes(plan.get("bytes_moved", 0.0))),
             ("unfixable fragments", f"{plan.get('unfixable_fragments', 0):,}")]
    load = plan.get("load_added_per_bookie", {})
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<title>Placement audit</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Placement audit of {_esc(summary['snapshot'])}</h1>",
        _table(["", ""], facts),
        "<h2>Violations</h2>",
        bar_chart("Violating fragments per kind", list(kinds), list(kinds.values()),
                  fmt=lambda v: f"{int(v):,}", color=PALETTE[2]),
        stacked_chart("Violating fragments per namespace and kind", namespaces, "namespace",
                      KIND_NAMES),
        "<h2>Where the data is</h2>",
        bar_chart("Stored bytes per rack", [a["name"] for a in racks],
                  [a["bytes"] for a in racks]),
        bar_chart("Stored bytes per bookie", [a["name"] for a in bookies],
                  [a["bytes"] for a in bookies], color=PALETTE[3]),
        heat_map("Rack by group", rack_names, group_names, cells),
        "<h3>Skew of stored bytes</h3>",
        _table(["per", "count", "max / mean", "std / mean"], skew_rows),
        "<h2>Repair plan</h2>",
        _table(["bookie", "load added"], [(b, human_bytes(v)) for b, v in
                                          list(load.items())[:20]]),
        "<h3>What the plan cannot fix</h3>",
        _table(["count", "kinds: reason"], [(n, r) for r, n in reasons.most_common(20)])
        if reasons else "<p>Everything found can be fixed by the plan.</p>",
        f"<script>{SCRIPT}</script></body></html>",
    ]
    return "\n".join(parts)
