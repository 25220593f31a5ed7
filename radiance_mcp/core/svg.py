"""The budget of each card as an SVG stacked bar: pure, figures in, SVG text out.

One bar per card, to the card's scale: the weights, the KV pool, the activation arena, what
the ledger does not attribute (the driver's context and the rest), then the settled free
memory, outlined, split into the headroom left to spend, the reserves and the engine floor.
Under the bar, one ghost row per option: where its MiB would go, in the colour of what it
grows. A legend repeats every figure, so the picture and the numbers cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from radiance_mcp.core.gates import one_line
from radiance_mcp.core.units import fmt_mib

COLOURS: dict[str, str] = {
    "weights": "#3b6fb6",
    "kv": "#3aa35b",
    "arena": "#c8423f",
    "other": "#9a9a9a",
    "headroom": "#f0c419",
    "reserves": "#e07b28",
    "floor": "#7d5ba6",
}
"""Fill of each kind of segment; a ghost is its target's colour, translucent and dashed."""

WIDTH = 960
LEFT = 16
BAR_WIDTH = WIDTH - 2 * LEFT
BAR_HEIGHT = 36
GHOST_HEIGHT = 18
LINE = 16


@dataclass(frozen=True)
class Segment:
    kind: str
    """A key of COLOURS."""
    label: str
    mib: float
    source: str = ""
    """Where the figure comes from, e.g. 'line 9'."""


@dataclass(frozen=True)
class Ghost:
    kind: str
    """What the option grows: 'kv' or 'weights'."""
    label: str
    start_mib: float
    mib: float


@dataclass(frozen=True)
class Bar:
    title: str
    total_mib: float
    segments: tuple[Segment, ...]
    """Left to right; the last three (headroom, reserves, floor) make up the settled free memory."""
    free_mib: float
    ghosts: tuple[Ghost, ...] = ()


@dataclass(frozen=True)
class Rect:
    """A drawn box, for a reader (or a test) to find a segment in the picture."""

    kind: str
    x: float
    y: float
    width: float
    height: float
    ghost: bool



def layout(bars: Sequence[Bar]) -> tuple[list[Rect], list[tuple[float, float, str, str]], float]:
    """The boxes and the text lines (x, y, text, weight) of the picture, and its height."""
    rects: list[Rect] = []
    texts: list[tuple[float, float, str, str]] = []
    y = 12.0
    for bar in bars:
        scale_mib = max(bar.total_mib, sum(max(0.0, s.mib) for s in bar.segments), 1.0)
        per_mib = BAR_WIDTH / scale_mib
        texts.append((LEFT, y + 12, f"{bar.title}: {fmt_mib(bar.total_mib, 2)} MiB card", "bold"))
        y += 20
        x = float(LEFT)
        for segment in bar.segments:
            width = max(0.0, segment.mib) * per_mib
            rects.append(Rect(segment.kind, x, y, width, BAR_HEIGHT, False))
            x += width
        rects.append(Rect("free", x - bar.free_mib * per_mib, y - 3, bar.free_mib * per_mib, BAR_HEIGHT + 6, False))
        y += BAR_HEIGHT + 8
        for ghost in bar.ghosts:
            rects.append(Rect(ghost.kind, LEFT + ghost.start_mib * per_mib, y, ghost.mib * per_mib, GHOST_HEIGHT,
                              True))
            texts.append((LEFT, y + GHOST_HEIGHT - 5, ghost.label, "normal"))
            y += GHOST_HEIGHT + 4
        y += 4
        for segment in bar.segments:
            source = f" ({segment.source})" if segment.source else ""
            texts.append((LEFT + 18, y + 11, f"{segment.label}: {fmt_mib(segment.mib, 2)} MiB{source}", segment.kind))
            y += LINE
        texts.append((LEFT + 18, y + 11, f"settled free: {fmt_mib(bar.free_mib, 2)} MiB (headroom + reserves + floor)",
                      "free"))
        y += LINE + 14
    return rects, texts, y


def _xml(text: str) -> str:
    """Free text (a title, a label, a source) as XML character data: one printable line, & < > " ' escaped.

    Security: a label from an input or a ledger could close the <text> element and open a <script>;
    a control character would make the document invalid XML (one_line replaces it with U+FFFD).
    """
    return escape(one_line(text), {'"': "&quot;", "'": "&apos;"})


def render(bars: Sequence[Bar]) -> str:
    """The SVG document for these bars."""
    rects, texts, height = layout(bars)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" font-family="sans-serif" font-size="12">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{height:.0f}" fill="#ffffff"/>',
    ]
    for r in rects:
        box = f'x="{r.x:.2f}" y="{r.y:.2f}" width="{r.width:.2f}" height="{r.height:.2f}"'
        if r.kind == "free":
            out.append(f'<rect {box} fill="none" stroke="#000000" stroke-width="1.5" stroke-dasharray="4 3"/>')
        elif r.ghost:
            colour = COLOURS[r.kind]
            out.append(f'<rect {box} fill="{colour}" fill-opacity="0.35" stroke="{colour}" stroke-width="1.5" '
                       'stroke-dasharray="5 3"/>')
        else:
            out.append(f'<rect {box} fill="{COLOURS[r.kind]}"/>')
    for x, y, text, kind in texts:
        if kind in COLOURS:
            out.append(f'<rect x="{LEFT:.2f}" y="{y - 10:.2f}" width="12" height="12" fill="{COLOURS[kind]}"/>')
        elif kind == "free":
            out.append(f'<rect x="{LEFT:.2f}" y="{y - 10:.2f}" width="12" height="12" fill="none" stroke="#000000" '
                       'stroke-dasharray="3 2"/>')
        weight = ' font-weight="bold"' if kind == "bold" else ""
        out.append(f'<text x="{x:.2f}" y="{y:.2f}"{weight}>{_xml(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
