"""``pt2chakra graph``: a window of the dependency graph as DOT, GraphML or
SVG (SVG via graphviz ``dot``).

A window keeps huge traces readable: an id range, a start-time range, and/or
N hops (both directions) around one node; the filters combine (AND). Windows
over ``max_nodes`` are refused with a hint rather than drawn unreadably.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import defaultdict, deque
from xml.sax.saxutils import escape

import msgspec

from pt2chakra.atomic import check_outputs, write_atomic
from pt2chakra.chakra.dep_kinds import dep_kinds_of
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import ChakraNode, NodeType, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.rules.conventions import is_gpu

FORMATS = (".dot", ".graphml", ".svg")
_KIND_COLORS = {"caller": "gray40", "thread_order": "black", "launch": "blue",
                "stream_order": "darkgreen", "stream_wait": "orange", "gpu_sync": "red",
                "inter_thread": "purple"}
_NAME_WIDTH = 40


class Window(msgspec.Struct):
    ids: tuple[int, int] | None = None  # inclusive
    time: tuple[int, int] | None = None  # start time in [low, high], us
    around: int | None = None
    hops: int = 2
    max_nodes: int = 2000
    ctrl: bool = False  # also draw ctrl_deps


class GraphStats(msgspec.Struct):
    """What ``render`` drew: the window's nodes and edges, out of ``total``
    nodes in the file."""

    output: str
    nodes: int
    edges: int
    total: int

    def summary(self) -> str:
        """The one line ``pt2chakra graph`` prints."""
        return (f"{self.output}: {self.nodes} nodes, {self.edges} edges"
                + (f" (window of {self.total})" if self.nodes != self.total else ""))


def _neighbourhood(path: str, window: Window) -> set[int]:
    assert window.around is not None
    adjacency: dict[int, list[int]] = defaultdict(list)
    seen = False
    _, nodes = read_et(path)
    for node in nodes:
        seen = seen or node.id == window.around
        deps = node.data_deps + (node.ctrl_deps if window.ctrl else [])
        for dep in deps:
            adjacency[node.id].append(dep)
            adjacency[dep].append(node.id)
    if not seen:
        raise InputError(path, f"--around {window.around}: no node with that id")
    keep = {window.around}
    frontier = deque([(window.around, 0)])
    while frontier:
        cur, dist = frontier.popleft()
        if dist == window.hops:
            continue
        for nxt in adjacency.get(cur, ()):
            if nxt not in keep:
                keep.add(nxt)
                frontier.append((nxt, dist + 1))
    return keep


def select(path: str | os.PathLike[str], window: Window) -> tuple[list[ChakraNode], int]:
    """(nodes in the window, total nodes in the file)."""
    path = os.fspath(path)
    near = _neighbourhood(path, window) if window.around is not None else None
    _, nodes = read_et(path)
    chosen: list[ChakraNode] = []
    total = 0
    for node in nodes:
        total += 1
        if window.ids is not None and not window.ids[0] <= node.id <= window.ids[1]:
            continue
        if window.time is not None and not (
                node.start_time_micros and window.time[0] <= node.start_time_micros
                <= window.time[1]):
            continue
        if near is not None and node.id not in near:
            continue
        chosen.append(node)
        if len(chosen) > window.max_nodes:
            raise InputError(path, f"the window has over {window.max_nodes} nodes: narrow it "
                             "with --ids LOW:HIGH, --time T0:T1 or --around ID --hops N "
                             "(or raise --max-nodes)")
    return chosen, total


def _edges(nodes: list[ChakraNode], ctrl: bool) -> list[tuple[int, int, str]]:
    ids = {n.id for n in nodes}
    edges = []
    for node in nodes:
        kinds = dep_kinds_of(node.data_deps, attr_dict(node.attrs))
        edges += [(src, node.id, kind) for src, kind in zip(node.data_deps, kinds) if src in ids]
        if ctrl:
            edges += [(src, node.id, "ctrl") for src in node.ctrl_deps if src in ids]
    return edges


def _short(name: str) -> str:
    return name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 3] + "..."


def _dot_str(text: str) -> str:
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ").replace("\r", " ")
    return f'"{out}"'


def _style(node: ChakraNode) -> str:
    attrs = attr_dict(node.attrs)
    if node.type in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
        return 'shape=ellipse, style=filled, fillcolor="#f4a6a6"'
    if node.type == NodeType.METADATA_NODE:
        return 'shape=note, style=filled, fillcolor="#dddddd"'
    color = "#a6c8f4" if is_gpu(attrs) else "#fff3b0"
    return f'shape=box, style=filled, fillcolor="{color}"'


def to_dot(nodes: list[ChakraNode], edges: list[tuple[int, int, str]]) -> str:
    lines = ["digraph chakra {", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8];']
    for node in nodes:
        label = f"{node.id}: {_short(node.name)}\\n{NodeType(node.type).name}"
        if node.duration_micros:
            label += f" {node.duration_micros} us"
        label = (label.replace("\\n", "\0").replace("\\", "\\\\").replace('"', '\\"')
                 .replace("\0", "\\n"))
        lines.append(f'  n{node.id} [label="{label}", {_style(node)}];')
    for src, dst, kind in edges:
        style = ", style=dashed" if kind == "ctrl" else ""
        color = _KIND_COLORS.get(kind, "black")
        lines.append(f"  n{src} -> n{dst} [color={color}, tooltip={_dot_str(kind)}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_graphml(nodes: list[ChakraNode], edges: list[tuple[int, int, str]]) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
           '  <key id="name" for="node" attr.name="name" attr.type="string"/>',
           '  <key id="type" for="node" attr.name="type" attr.type="string"/>',
           '  <key id="start" for="node" attr.name="start_time_micros" attr.type="long"/>',
           '  <key id="dur" for="node" attr.name="duration_micros" attr.type="long"/>',
           '  <key id="kind" for="edge" attr.name="kind" attr.type="string"/>',
           '  <graph id="chakra" edgedefault="directed">']
    for node in nodes:
        out.append(f'    <node id="n{node.id}"><data key="name">{_xml(node.name)}</data>'
                   f'<data key="type">{NodeType(node.type).name}</data>'
                   f'<data key="start">{node.start_time_micros}</data>'
                   f'<data key="dur">{node.duration_micros}</data></node>')
    for i, (src, dst, kind) in enumerate(edges):
        out.append(f'    <edge id="e{i}" source="n{src}" target="n{dst}">'
                   f'<data key="kind">{_xml(kind)}</data></edge>')
    out += ["  </graph>", "</graphml>"]
    return "\n".join(out) + "\n"


def _xml(text: str) -> str:
    # XML 1.0 forbids most control characters even escaped.
    cleaned = "".join(c if c >= " " or c in "\t\n\r" else "?" for c in text)
    return escape(cleaned)


def dot_to_svg(dot_text: str, output: str) -> None:
    exe = shutil.which("dot")
    if exe is None:
        raise InputError(output, "graphviz 'dot' is not on PATH: install graphviz, or write "
                         ".dot / .graphml instead")
    proc = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True,
                          timeout=600)
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        raise InputError(output, "dot failed: " + (message[0] if message else "no message"))
    write_atomic(output, proc.stdout)


def render_graph(path: str | os.PathLike[str], output: str | os.PathLike[str],
           window: Window | None = None) -> GraphStats:
    """Write the window as .dot / .graphml / .svg (by the output's suffix)."""
    output = os.fspath(output)
    check_outputs([path], [output])
    suffix = os.path.splitext(output)[1].lower()
    if suffix not in FORMATS:
        raise InputError(output, f"unknown output format {suffix!r}: use {', '.join(FORMATS)}")
    window = window or Window()
    nodes, total = select(path, window)
    edges = _edges(nodes, window.ctrl)
    if suffix == ".graphml":
        write_atomic(output, to_graphml(nodes, edges).encode())
    elif suffix == ".dot":
        write_atomic(output, to_dot(nodes, edges).encode())
    else:
        dot_to_svg(to_dot(nodes, edges), output)
    return GraphStats(output=output, nodes=len(nodes), edges=len(edges), total=total)
