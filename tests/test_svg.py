"""The picture: each card's budget as a stacked bar, rendered by a real SVG renderer (librsvg's rsvg-convert)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from mcp import Client
from mcp_types import ImageContent
from shared_server import empty_fleet_server

from radiance_mcp.app.cli import main
from radiance_mcp.app.server import build_server
from radiance_mcp.core import svg
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime

RSVG = shutil.which("rsvg-convert")
needs_rsvg = pytest.mark.skipif(RSVG is None, reason="rsvg-convert (Debian: librsvg2-bin) is not installed; "
                                                     ".ci/run installs it")

Pixels = list[list[tuple[int, int, int, int]]]


def png_pixels(data: bytes) -> tuple[int, int, Pixels]:
    """Decode an 8-bit RGBA or RGB, non-interlaced PNG (what rsvg-convert writes): width, height, rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    channels = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(line)
        previous = line
    pixels = [[tuple(row[x * channels:x * channels + channels]) + ((255,) if channels == 3 else ())  # type: ignore[misc]
               for x in range(width)] for row in rows]
    return width, height, pixels


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def close(found: tuple[int, ...], expected: tuple[int, int, int], tolerance: int = 6) -> bool:
    return all(abs(f - e) <= tolerance for f, e in zip(found[:3], expected, strict=True))


def render_png(svg_text: str, tmp_path: Path) -> bytes:
    source = tmp_path / "plan.svg"
    source.write_text(svg_text, encoding="utf-8")
    assert RSVG is not None
    done = subprocess.run([RSVG, str(source)], capture_output=True, check=True)
    return done.stdout


async def plan_result(example_path: Path, **extra: object) -> tuple[dict[str, object], str]:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("plan_free_vram", {"log": str(example_path), **extra})
    assert not result.is_error and result.structured_content is not None
    images = [c for c in result.content if isinstance(c, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/svg+xml"
    return result.structured_content, base64.b64decode(images[0].data).decode()


def test_segments_are_drawn_to_the_cards_scale() -> None:
    bar = svg.Bar("card 0", 32_000, (svg.Segment("weights", "w", 24_000), svg.Segment("kv", "kv", 4_000),
                                     svg.Segment("headroom", "h", 3_000), svg.Segment("floor", "f", 1_000)), 4_000)
    rects, _, _ = svg.layout([bar])
    widths = {r.kind: r.width for r in rects}
    assert widths["weights"] == pytest.approx(svg.BAR_WIDTH * 24_000 / 32_000)  # three quarters of the bar
    assert widths["kv"] == pytest.approx(svg.BAR_WIDTH / 8)  # 4,000 of 32,000
    free = next(r for r in rects if r.kind == "free")
    assert free.x == pytest.approx(svg.LEFT + svg.BAR_WIDTH * 28_000 / 32_000)  # the last 4,000 MiB
    assert "&lt;b&gt;" in svg.render([svg.Bar("<b>", 1, (), 0)])  # titles are text, never markup


@pytest.mark.slow
@needs_rsvg
async def test_the_picture_shows_the_plans_figures_and_renders(example_path: Path, tmp_path: Path) -> None:
    out, picture = await plan_result(example_path, reserves=[{"mib": 400, "label": "a second model", "personal": True}])
    # the legend repeats the output's own figures, each with its line
    for text in ("vram_weights: 24,000 MiB (line 9)", "vram_kv (the KV pool): 5,120 MiB (line 10)",
                 "activation arena: 504 MiB (line 12)", "engine floor: 209.19 MiB (line 26)",
                 "settled free: 2,058.24 MiB", "reserves: 400 MiB (a second model)",
                 "headroom to spend: 1,449.05 MiB",  # 2,058.24 - 209.19 - 400
                 "more KV, fp8: +1,449 MiB", "more slab: +1,449 MiB"):
        assert text in picture, text
    plan = out["services"][0]  # type: ignore[index]
    assert plan["usable_mib"] == 1_449  # the same figure as the ghost's
    width, height, pixels = png_pixels(render_png(picture, tmp_path))
    assert width == svg.WIDTH and height > 200 and height == int(picture.split('height="')[1].split('"')[0])
    # every segment's colour is where the layout puts it; a ghost is its colour at 35 % over white
    seen = set()
    for rect in (r for r in svg_rects(picture) if r.kind != "free" and r.width >= 4):
        x, y = int(rect.x + rect.width / 2), int(rect.y + rect.height / 2)
        expected = rgb(svg.COLOURS[rect.kind])
        if rect.ghost:
            expected = tuple(round(255 - 0.35 * (255 - c)) for c in expected)  # type: ignore[assignment]
        assert close(pixels[y][x], expected), (rect, pixels[y][x], expected)
        seen.add((rect.kind, rect.ghost))
    assert {("weights", False), ("kv", False), ("arena", False), ("headroom", False), ("reserves", False),
            ("floor", False), ("kv", True), ("weights", True)} <= seen
    assert close(pixels[2][2], (255, 255, 255))  # the background


def svg_rects(picture: str) -> list[svg.Rect]:
    """The drawn boxes back out of the SVG text, so the test reads what was rendered, not what was meant."""
    found = []
    for match in re.finditer(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" (fill="[^"]*")'
                             r'( fill-opacity="[^"]*")?', picture):
        x, y, w, h = (float(match.group(i)) for i in range(1, 5))
        fill = match.group(5)[6:-1]
        if h < 14:  # legend swatches
            continue
        kind = next((k for k, c in svg.COLOURS.items() if c == fill), "free")
        found.append(svg.Rect(kind, x, y, w, h, match.group(6) is not None))
    return found


@pytest.mark.slow
@needs_rsvg
def test_the_cli_writes_the_picture(example_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "budget.svg"
    assert main(["plan-free-vram", "--log", str(example_path), "--svg", str(target), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    picture = target.read_text(encoding="utf-8")
    assert f"headroom to spend: {1_849.05:,.2f} MiB" in picture and out["services"][0]["usable_mib"] == 1_849
    width, _, _ = png_pixels(render_png(picture, tmp_path))
    assert width == svg.WIDTH


@pytest.mark.slow
@needs_rsvg
async def test_the_fleets_picture_has_a_bar_per_card_and_names_a_shared_one(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path / "fleet", time_scale=0.0001) as fleet:
        async with Client(build_server(Runtime(load(fleet.config_path)))) as client:
            result = await client.call_tool("plan_free_vram", {})
    images = [c for c in result.content if isinstance(c, ImageContent)]
    picture = base64.b64decode(images[0].data).decode()
    # frank-archon, lowpool, qwen38-proven, and twin's two cards: five bars; qwen38-wide refused to boot
    assert picture.count(" MiB card</text>") == 5
    # lowpool reads 3,968 MiB of its own, but gpubox:1's headroom is twin's 1,787 less lowpool's floor (210)
    assert "lowpool card 0 (gpubox:1, shared with twin: 1,577 MiB of headroom counted once)" in picture
    width, height, _ = png_pixels(render_png(picture, tmp_path))
    assert width == svg.WIDTH and height > 5 * (svg.BAR_HEIGHT + 3 * svg.GHOST_HEIGHT)
