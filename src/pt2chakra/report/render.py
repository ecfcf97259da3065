"""``ReportData`` as one self-contained HTML page: styles and the script
inlined from ``static/``, charts drawn as SVG here, the timeline drawn by
the page's script from the JSON it carries. Nothing is fetched when the
page opens (no URL in any ``src`` or ``href``)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from importlib import resources

import msgspec

from pt2chakra.conversion import ConversionReport
from pt2chakra.diff import CATEGORIES, CATEGORY_TITLES, DEFAULT_TOP, DiffResult
from pt2chakra.simulation import CollectiveRow, SimulationResult, timing_notes
from pt2chakra.simulation.results import CriticalPath
from pt2chakra.simulation.text_report import measured_collectives, profiler_lines, step_notes
from pt2chakra.simulation.views import CATEGORY_COLORS
from pt2chakra.version import __version__

from .gather import (
    BASELINE_RUN,
    MAX_COLLECTIVE_ROWS,
    THIS_RUN,
    CollectiveGroup,
    Comparison,
    OpRow,
    ReportData,
    Timeline,
    WhatIfRow,
)

# Ranks whose lanes are drawn when the page opens; the others are drawn
# when their section is opened (a 64-rank page opens quickly).
OPEN_RANKS = 8
# Colours of what the critical path is made of beyond node categories, and
# of edge kinds (cycled).
_PART_COLORS = {**CATEGORY_COLORS, "wait": "#e377c2"}
_KIND_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf",
                 "#bcbd22", "#7f7f7f", "#e377c2", "#d62728")
# Geometry of the per-rank summary chart (pixels), and how many ranks
# of it are labelled at most.
_CHART_W, _LABEL_W, _VALUE_W = 720, 70, 170
_LABELLED_RANKS = 16


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def fmt_us(us: float | None) -> str:
    """A duration for people: us, ms or s with three significant digits."""
    if us is None or us != us:  # None or NaN
        return "n/a"
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.3g} s"
    if a >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} us"


def fmt_bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f} %"


def fmt_gbps(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g} GB/s"


def _static(name: str) -> str:
    return resources.files("pt2chakra.report").joinpath("static").joinpath(name).read_text(
        "utf-8")


def _json_script(element_id: str, data: object) -> str:
    """JSON in a script element: every ``<`` is written ``\\u003c`` (the same
    string to a JSON parser), so no value (``</script``, ``<!--``, ``<script``)
    can end the element or change how the browser reads it."""
    text = msgspec.json.encode(data).decode().replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _table(head: Sequence[str], rows: Iterable[Sequence[tuple[str, object]]],
           cls: str = "") -> str:
    """A sortable table: each cell is (text shown, value sorted by)."""
    out = [f'<table class="sortable {cls}"><thead><tr>']
    out += [f"<th>{_esc(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>")
        for text, value in row:
            num = isinstance(value, (int, float)) and not isinstance(value, bool)
            attr = f' data-v="{value}"' if num else ""
            out.append(f'<td{attr}{" class=num" if num else ""}>{text}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _t(us: float | None) -> tuple[str, object]:
    return _esc(fmt_us(us)), (us if us is not None and us == us else -1.0)


def _s(text: object) -> tuple[str, object]:
    return _esc(text), str(text)


def _n(value: int) -> tuple[str, object]:
    return f"{value:,}", value


# --------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------


def _summary(data: ReportData) -> str:
    r = data.result
    err_cls = "bad" if r.error_pct is not None and abs(r.error_pct) > 10 else "good"
    if r.scaled is not None:  # against a recording at fewer ranks: no error to judge
        err_cls = ""
    cards = (f'<div class="cards"><div class="card"><div class="k">predicted step</div>'
             f'<div class="v">{_esc(fmt_us(r.predicted_step_us))}</div></div>'
             f'<div class="card"><div class="k">{_esc(r.measured_label)} step'
             + (f' ({r.scaled.recorded_world_size} ranks)' if r.scaled is not None else '')
             + '</div>'
             f'<div class="v">{_esc(fmt_us(r.measured_step_us))}</div></div>'
             f'<div class="card {err_cls}"><div class="k">{_esc(r.error_label)}</div>'
             f'<div class="v">{_esc(fmt_pct(r.error_pct))}</div></div>'
             + (f'<div class="card"><div class="k">with the profiler (replay)</div>'
                f'<div class="v">{_esc(fmt_us(r.profiler_overhead.profiled_step_us))}</div>'
                '</div>' if r.profiler_overhead is not None else "")
             + f'<div class="card"><div class="k">ranks / nodes</div>'
             f'<div class="v">{len(r.ranks)} / {data.nodes:,}</div></div></div>')
    how = (f"<p class=note>Start offsets: {_esc(r.align)}; collectives: "
           f"{_esc(r.network_model or measured_collectives(r.align))}"
           + (f"; {r.inferred_stream_waits} cross-stream waits inferred"
              if r.inferred_stream_waits else "") + ".</p>"
           + "".join(f'<p class="warn">{_esc(line)}</p>' for line in timing_notes(r))
           + "".join(f'<p>{_esc(line)}</p>' for line in step_notes(r))
           + "".join(f'<p>{_esc(line.strip())}</p>' for line in profiler_lines(r) if line))
    rows = [[(_esc(x.rank), x.rank), _t(x.predicted_step_us), _t(x.measured_step_us),
             (_esc(fmt_pct(x.error_pct)), x.error_pct if x.error_pct is not None else 0.0),
             _n(x.nodes), _n(len(x.lanes)), _n(x.unfinished), _s(x.source.rsplit("/", 1)[-1])]
            for x in r.ranks]
    table = _table(["rank", "predicted", r.measured_label, r.error_label, "nodes", "lanes",
                    "never ran", "file"], rows)
    versus = "measured" if r.scaled is None else "recorded"
    return (f'<section id="summary"><h2>Summary: predicted vs {versus} step</h2>{cards}{how}'
            f'<div class="two"><div>{_rank_chart(r)}</div><div class="scroll">{table}</div></div>'
            '</section>')


def _rank_chart(r: SimulationResult) -> str:
    """Per rank, a bar for the predicted step over one for the measured one."""
    bar_h = 9 if len(r.ranks) <= 16 else 4
    row_h = 2 * bar_h + (8 if len(r.ranks) <= 16 else 3)
    top = max([x.predicted_step_us for x in r.ranks] + [x.measured_step_us for x in r.ranks]
              + [1e-9])
    plot_w = _CHART_W - _LABEL_W - _VALUE_W
    h = row_h * len(r.ranks) + 24
    label = r.measured_label  # "recorded" for scaled-out files
    out = [f'<svg class="chart" viewBox="0 0 {_CHART_W} {h}" width="{_CHART_W}" height="{h}" '
           f'role="img" aria-label="predicted and {label} step per rank">']
    every = -(-len(r.ranks) // _LABELLED_RANKS)  # label every n-th rank: no overlap
    for k, x in enumerate(r.ranks):
        y = k * row_h + 2
        if k % every == 0:
            out.append(f'<text x="{_LABEL_W - 6}" y="{y + bar_h + 3}" class="lbl" '
                       f'text-anchor="end">rank {_esc(x.rank)}</text>')
        for j, (us, cls) in enumerate(((x.predicted_step_us, "pred"),
                                       (x.measured_step_us, "meas"))):
            w = plot_w * us / top
            out.append(f'<rect class="{cls}" x="{_LABEL_W}" y="{y + j * bar_h}" width="{w:.1f}" '
                       f'height="{bar_h - 1}"><title>rank {_esc(x.rank)} '
                       f'{"predicted" if cls == "pred" else label}: '
                       f'{_esc(fmt_us(us))}</title></rect>')
        if bar_h > 5:
            out.append(f'<text x="{_LABEL_W + plot_w + 6}" y="{y + bar_h + 3}" class="val">'
                       f'{_esc(fmt_us(x.predicted_step_us))} vs {_esc(fmt_us(x.measured_step_us))}'
                       f' ({_esc(fmt_pct(x.error_pct))})</text>')
    ly = row_h * len(r.ranks) + 14
    out.append(f'<rect class="pred" x="{_LABEL_W}" y="{ly - 8}" width="10" height="9"/>'
               f'<text x="{_LABEL_W + 14}" y="{ly}" class="lbl">predicted</text>'
               f'<rect class="meas" x="{_LABEL_W + 90}" y="{ly - 8}" width="10" height="9"/>'
               f'<text x="{_LABEL_W + 104}" y="{ly}" class="lbl">{label}</text></svg>')
    return "".join(out)


def _legend(tl: Timeline, extra: str) -> str:
    return ('<div class="legend">'
            + "".join(f'<span><i style="background:{c}"></i>{_esc(n)}</span>'
                      for n, c in zip(tl.categories, tl.colors)) + extra + "</div>")


def _merged(tl: Timeline) -> str:
    return (f" Bars closer than {_esc(fmt_us(tl.merged_below_us))} (at most) are merged "
            "into one, coloured by the category holding most of its time; the tooltip "
            "says how many nodes it stands for." if tl.merged_below_us else
            " Every node is drawn.")


def _lanes(prefix: str, checkboxes: str, legend: str) -> str:
    """The controls, the axis and the lanes of one timeline; the page's
    script draws it from the JSON ``<prefix>timeline-data``."""
    return ('<div class="controls"><button type="button" data-zoom="in">zoom in</button>'
            '<button type="button" data-zoom="out">zoom out</button>'
            '<button type="button" data-zoom="reset">reset</button>'
            f'{checkboxes}<span id="{prefix}range" class="note"></span></div>'
            + legend
            + f'<div id="{prefix}axis-wrap" class="axis-wrap"><svg id="{prefix}axis" class="axis" '
            'height="26"></svg></div>'
            f'<div id="{prefix}lanes"><noscript>The timeline is drawn by the page\'s script.'
            '</noscript></div>')


def _timeline(data: ReportData) -> str:
    tl = data.timeline
    legend = _legend(tl, '<span><i class="cpkey"></i>critical path (under its lane)</span>'
                     '<span><i class="meas"></i>measured (lighter, below its simulated lane)'
                     '</span>')
    lanes = _lanes("", '<label><input type="checkbox" id="dim"> dim what is off the critical '
                   'path</label><label><input type="checkbox" id="hide-measured"> hide measured '
                   'lanes</label>', legend)
    return (
        '<section id="timeline"><h2>Lane timeline: simulated vs measured</h2>'
        '<p class="note">Each lane (CPU thread, GPU stream) as the simulator replayed it, '
        'with the recorded run beneath it on the same time axis. Ctrl+wheel (or the buttons) '
        'zooms, dragging pans, dragging on the time axis zooms to a range, a double-click '
        f'resets. {tl.bars:,} bars drawn.{_merged(tl)}</p>'
        + lanes + '<div id="tip" hidden></div></section>')


def _breakdown(title: str, parts: dict[str, float], total: float,
               colors: dict[str, str]) -> str:
    """One stacked bar (SVG) and its table: where ``total`` went."""
    w, h = 720, 26
    x = 0.0
    rects, rows = [], []
    for k, (name, us) in enumerate(parts.items()):
        color = colors.get(name, _KIND_PALETTE[k % len(_KIND_PALETTE)])
        share = us / total if total else 0.0
        rects.append(f'<rect x="{x:.2f}" y="0" width="{w * share:.2f}" height="{h}" '
                     f'fill="{color}"><title>{_esc(name)}: {_esc(fmt_us(us))} '
                     f'({share * 100:.1f} %)</title></rect>')
        x += w * share
        rows.append([(f'<i class="sw" style="background:{color}"></i>{_esc(name)}', name),
                     _t(us), (f"{share * 100:.1f} %", share * 100)])
    svg = (f'<svg class="stack" viewBox="0 0 {w} {h}" preserveAspectRatio="none" role="img" '
           f'aria-label="{_esc(title)}">{"".join(rects)}</svg>')
    return f"<h3>{_esc(title)}</h3>{svg}{_table([title.split(' by ')[-1], 'time', 'share'], rows)}"


def _critical(cp: CriticalPath | None) -> str:
    if cp is None or not cp.nodes:
        return ('<section id="critical"><h2>Critical path</h2><p>No node ran, so there is '
                'no critical path.</p></section>')
    head = (f'<p class="big">{_esc(fmt_us(cp.length_us))} over {cp.nodes:,} nodes'
            + (f", crossing ranks {cp.rank_crossings} time{'s' if cp.rank_crossings > 1 else ''}"
               if cp.rank_crossings else "")
            + '</p><p class="note">The chain of nodes and waits that decided when the step '
              'ended, walked back from the last node to end. It is underlined in red on the '
              'timeline. "By dependency kind" charges each step of the path to the kind of '
              'the edge that made it wait (the converter\'s kinds, plus the simulator\'s '
              'lane_order and rank_start).</p>')
    top = [[_s(t["rank"]), _s(t["id"]), _s(str(t["name"])[:120]), _s(t["category"]),
            _t(float(t["duration_us"]))] for t in cp.top_nodes]
    return ('<section id="critical"><h2>Critical path</h2>' + head
            + '<div class="two"><div>'
            + _breakdown("Critical path by node type", cp.by_node_type, cp.length_us,
                         _PART_COLORS)
            + "</div><div>"
            + _breakdown("Critical path by dependency kind", cp.by_edge_kind, cp.length_us, {})
            + "</div></div><h3>Longest nodes on the path</h3>"
            + _table(["rank", "node", "name", "category", "duration"], top) + "</section>")


def _top_ops(ops: list[OpRow]) -> str:
    rows = [[_s(o.name), _s(o.category), _n(o.count), _t(o.simulated_us), _t(o.recorded_us),
             _t(o.critical_us)] for o in ops]
    return ('<section id="ops"><h2>Top ops</h2><p class="note">Op names per category, summed '
            'over every rank, by the time they held their lane in the replay (a CPU op holds '
            'its thread until its first callee starts). "On critical path" is the time of its '
            'nodes on the path.</p>'
            + _table(["name", "category", "count", "simulated", "recorded", "on critical path"],
                     rows) + "</section>")


def _collectives(rows: list[CollectiveRow], total: int, groups: list[CollectiveGroup]) -> str:
    if not total:
        return ('<section id="comm"><h2>Communication</h2><p>No communication nodes.</p>'
                '</section>')
    g_rows = [[_s(g.what), (_esc(fmt_bytes(g.size_bytes)), g.size_bytes), _n(g.count),
               _t(g.measured_us), (_esc(fmt_gbps(g.algbw_gbps)), g.algbw_gbps or 0.0),
               (_esc(fmt_gbps(g.busbw_gbps)), g.busbw_gbps or 0.0)] for g in groups]
    c_rows = [[_s(c.what), _s(c.name), _s(c.group), _s(",".join(map(str, c.ranks))),
               (_esc(fmt_bytes(c.size_bytes)), c.size_bytes), _t(c.start_us), _t(c.measured_us),
               _t(c.measured_max_us), _t(c.simulated_us),
               (_esc(fmt_gbps(c.algbw_gbps)), c.algbw_gbps or 0.0),
               (_esc(fmt_gbps(c.busbw_gbps)), c.busbw_gbps or 0.0),
               ("yes" if c.critical else "", int(c.critical)),
               _rank_cell(c.measured_last_rank), _t(c.measured_others_wait_us),
               _rank_cell(c.replay_last_rank), _t(c.replay_others_wait_us)] for c in rows]
    shown = (f"all {total:,}" if len(rows) == total
             else f"the {len(rows):,} longest of {total:,}")
    return ('<section id="comm"><h2>Communication</h2><p class="note">Each collective (or '
            'transfer) matched across ranks. "Measured" is the shortest participant kernel '
            '(a longer one also waited for its peers), "slowest" the longest. Achieved '
            'bandwidth: algbw = payload / measured time; busbw = algbw x the collective\'s '
            'byte factor (nccl-tests\' convention, comparable with the link speed). "Last" '
            'is the rank that reached the collective last (the straggler), as recorded and '
            'in the replay; "others waited" sums the other ranks\' wait for it.</p>'
            '<h3>By kind and payload</h3>'
            + _table(["kind", "payload", "count", "total measured", "algbw", "busbw"], g_rows)
            + f"<h3>Each collective ({shown})</h3>"
            + _table(["kind", "name", "matched as", "ranks", "payload", "start (sim)",
                      "measured", "slowest", "simulated", "algbw", "busbw", "critical",
                      "last (measured)", "others waited (measured)", "last (replay)",
                      "others waited (replay)"],
                     c_rows, "small") + "</section>")


def _rank_cell(rank: int | None) -> tuple[str, object]:
    return ("-", -1) if rank is None else (_esc(rank), rank)


def _baseline(c: Comparison | None) -> str:
    """What changed against the baseline: the diff's tables (as ``pt2chakra
    diff`` prints them) and both runs' recorded lanes on one time axis."""
    if c is None:
        return ""
    d = c.result
    cards = (f'<div class="cards"><div class="card"><div class="k">baseline step</div>'
             f'<div class="v">{_esc(fmt_us(d.a.step_us))}</div></div>'
             f'<div class="card"><div class="k">this run\'s step</div>'
             f'<div class="v">{_esc(fmt_us(d.b.step_us))}</div></div>'
             f'<div class="card"><div class="k">difference</div>'
             f'<div class="v">{_esc(_signed_us(d.difference_us))}</div></div>'
             f'<div class="card"><div class="k">residual</div>'
             f'<div class="v">{_esc(_signed_us(d.residual_us))}</div></div></div>')
    how = (f'<p class="note">Baseline (A): {_esc(_files(c.sources))}; this run (B): '
           f'{_esc(_files(d.b.sources))}. The step difference B - A is cut along each run\'s '
           'critical path and charged to what changed; the parts add up to the difference '
           f'(the residual is rounding). Nodes: {d.matched_nodes:,} matched, '
           f'{d.only_in_a_nodes:,} in the baseline only, {d.only_in_b_nodes:,} in this run '
           'only (pt2chakra diff).</p>')
    return ('<section id="baseline"><h2>Compared with the baseline</h2>' + cards + how
            + "<h3>By category</h3>" + _diff_categories(d)
            + f"<h3>Largest changes (top {DEFAULT_TOP} per category)</h3>" + _diff_rows(d)
            + _diff_collectives(d) + _comparison_timeline(c.timeline) + "</section>")


def _signed_us(us: float) -> str:
    return ("+" if us > 0 else "") + fmt_us(us)


def _files(sources: Sequence[str]) -> str:
    names = [s.rsplit("/", 1)[-1] for s in sources]
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} ranks)"


def _share(pct: float | None) -> tuple[str, object]:
    return ("-", 0.0) if pct is None else (f"{pct:+.1f} %", pct)


def _diff_categories(d: DiffResult) -> str:
    rows = [[_s(CATEGORY_TITLES.get(c.category, c.category)), _t(c.a_us), _t(c.b_us),
             (_esc(_signed_us(c.delta_us)), c.delta_us), _share(c.share_pct)]
            for c in d.categories]
    return _table(["category", "baseline", "this run", "B - A", "% of difference"], rows)


def _diff_rows(d: DiffResult) -> str:
    rows = [[_s(category), _s(r.label), _t(r.a_us), _t(r.b_us),
             (_esc(_signed_us(r.delta_us)), r.delta_us), _share(r.share_pct)]
            for category in CATEGORIES for r in d.top(category, DEFAULT_TOP)
            if r.delta_us or r.a_us or r.b_us]
    return _table(["category", "what", "baseline", "this run", "B - A", "% of difference"],
                  rows, "small")


def _diff_collectives(d: DiffResult) -> str:
    if not d.collectives:
        return ""
    rows = [[_rank_cell(s.last_rank_a), _t(s.others_wait_a_us), _rank_cell(s.last_rank_b),
             _t(s.others_wait_b_us), _s(s.label)] for s in d.collectives[:MAX_COLLECTIVE_ROWS]]
    return ("<h3>Collectives: the last rank to arrive (straggler) and the others' wait for it"
            "</h3>" + _table(["baseline last", "baseline others waited", "this run last",
                              "this run others waited", "collective"], rows, "small"))


def _comparison_timeline(tl: Timeline) -> str:
    lanes = _lanes("base-", "", _legend(tl, ""))
    return ('<h3>Both runs\' recorded lanes on one time axis</h3>'
            f'<p class="note">Per rank, the baseline\'s lanes ("{BASELINE_RUN}") above this '
            f'run\'s ("{THIS_RUN}"), as recorded; each rank\'s step starts where its start '
            f'offset puts it, in both runs. {tl.bars:,} bars drawn.{_merged(tl)}</p>'
            + f'<div class="comparison">{lanes}</div>')


def _what_if(rows: list[WhatIfRow], baseline: float) -> str:
    if not rows:
        return ""
    top = max([w.row.predicted_step_us for w in rows] + [baseline, 1e-9])
    body = [[_s("baseline"), _t(baseline), ("1.000x", 1.0), ("+0.0 %", 0.0),
             (_bar(baseline / top), baseline)]]
    for w in rows:
        p = w.row.predicted_step_us
        delta = (p - baseline) / baseline * 100 if baseline else 0.0
        body.append([_s(w.label), _t(p), (f"{w.row.speedup:.3f}x", w.row.speedup),
                     (f"{delta:+.1f} %", delta), (_bar(p / top), p)])
    return ('<section id="whatif"><h2>What if</h2><p class="note">The same replay with one '
            'setting changed: compute scales GPU kernels, CPU scales CPU ops and gaps, '
            'bandwidth divides collective times (or scales the network model).</p>'
            + _table(["setting", "predicted step", "speedup", "change", ""], body)
            + "</section>")


def _bar(share: float) -> str:
    return f'<div class="hbar"><div style="width:{max(0.0, min(1.0, share)) * 100:.1f}%"></div></div>'


def _dropped(d: dict[str, int]) -> str:
    return "<br>".join(f"{v:,} {_esc(k)}" for k, v in d.items()) or "none"


def _conversion(reports: list[ConversionReport]) -> str:
    if not reports:
        return ""
    rows = [[_s(c.output.rsplit("/", 1)[-1]), _s(c.link_method), _n(c.host_ops_in),
             _n(c.host_ops_linked), _n(c.host_ops_kept), (_dropped(c.host_ops_dropped),
                                                         sum(c.host_ops_dropped.values())),
             _n(c.gpu_activities_in), _n(c.gpu_activities_kept),
             (_dropped(c.gpu_activities_dropped), sum(c.gpu_activities_dropped.values())),
             _n(c.nodes),
             ("<br>".join(f"{k} {v:,}" for k, v in sorted(c.edges_by_kind.items())),
              sum(c.edges_by_kind.values())),
             (_esc("; ".join(c.cycles_broken) or "none"), len(c.cycles_broken)),
             ("yes" if c.accounted() else "NO", int(c.accounted()))] for c in reports]
    return ('<section id="conversion"><h2>Conversion accounting</h2><p class="note">Every '
            'input op kept or dropped with a reason (pt2chakra convert --report).</p>'
            + _table(["output", "linked by", "host ops in", "linked", "kept", "dropped",
                      "GPU activities in", "kept", "dropped", "nodes", "edges",
                      "cycles broken", "accounted"], rows, "small") + "</section>")


_SECTIONS = (("summary", "Summary"), ("baseline", "Baseline"), ("timeline", "Timeline"), ("critical", "Critical path"),
             ("ops", "Top ops"), ("comm", "Communication"), ("whatif", "What if"),
             ("conversion", "Conversion"))


def render(data: ReportData) -> str:
    """The whole page."""
    r = data.result
    body = [_summary(data), _baseline(data.comparison), _timeline(data),
            _critical(r.critical_path),
            _top_ops(data.top_ops),
            _collectives(data.collectives, data.collectives_total, data.collective_groups),
            _what_if(data.what_if, r.predicted_step_us), _conversion(data.conversion)]
    present = [(k, v) for k, v in _SECTIONS if any(f'id="{k}"' in b for b in body)]
    nav = "".join(f'<a href="#{k}">{_esc(v)}</a>' for k, v in present)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>pt2chakra report: {_esc(data.title)}</title>"
        f"<style>{_static('report.css')}</style></head><body>"
        f'<header><h1>{_esc(data.title)}</h1><p class="note">{len(r.ranks)} '
        f'rank{"s" if len(r.ranks) != 1 else ""}, {data.nodes:,} nodes; pt2chakra '
        f'{_esc(__version__)}</p><nav>{nav}</nav></header><main>'
        + "".join(body) + "</main>"
        + _json_script("timeline-data", {"open_ranks": OPEN_RANKS, **msgspec.structs.asdict(
            data.timeline)})
        + ("" if data.comparison is None else _json_script(
            "base-timeline-data", {"open_ranks": OPEN_RANKS, **msgspec.structs.asdict(
                data.comparison.timeline)}))
        + f"<script>{_static('report.js')}</script></body></html>")
