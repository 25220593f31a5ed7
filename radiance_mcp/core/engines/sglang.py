"""SGLang's start-up ledger: its phrase table and the typed view of one boot.

What SGLang prints, per rank (lines carry a `[time TPn]`, `[time DPd TPn EPe]` or, under
pipeline parallelism, `[time PPp TPn]` prefix; the rank is its DP, PP and TP tags, since
PP0 TP0 and PP1 TP0 are two cards; a single-GPU server prints no rank):
`Load weight begin. avail mem=X GB`, `Load weight end. type=..., dtype=..., avail mem=X GB,
mem usage=W GB.` (the weights), `KV Cache is allocated. #tokens: N, K size: K GB, V size:
V GB` (MLA models: `KV size: X GB`; from 2026 with `dtype: D, ` before `#tokens`; before 2025
without `#tokens`, which the summary's max_total_num_tokens then gives), `Memory
pool end. avail mem=X GB`, `Capture cuda graph begin ... avail mem=X GB` and `Capture cuda graph end.
Time elapsed: T s. mem usage=G GB. avail mem=X GB.`, then the scheduler's summary
`max_total_num_tokens=N, chunked_prefill_size=..., max_prefill_tokens=...,
max_running_requests=R, context_len=C, available_gpu_mem=X GB`. SGLang's "GB" is GiB: it
divides by 1 << 30 (a K size of 8.23 GB for 367,404 tokens of 94 layers x 1 KV head x 128
x 2 bytes is 8.23 GiB). The boot starts at its `server_args=ServerArgs(...)` line.

The procedures in SGLang's terms:
- Settled free: `available_gpu_mem` of the scheduler's summary (after the KV pool and the
  CUDA graphs), else `Capture cuda graph end. ... avail mem`; `Memory pool end. avail mem`
  only where the boot captures no CUDA graphs (no rank prints a capture line or the capture's
  `Capturing batches` progress bar; SGLang before
  2025 prints its capture lines without memory and its summary without available_gpu_mem,
  so such a boot has no settled free figure). The floor
  is what `--mem-fraction-static` keeps back: (1 - fraction) of the card's memory is left
  for activations (SGLang prints no figure for them); free memory beyond that floor is
  memory the KV pool could have had.
- The flag that moves the KV memory: `--mem-fraction-static` (weights + KV pool as a share
  of the card), or `--max-total-tokens` (caps the pool in tokens). `--context-length` moves
  the window, `--max-running-requests` the sequences.
- Refused boots: `Not enough memory. Please try to increase --mem-fraction-static.` (no
  room for a pool at all; from 2026 `Loaded weights leave no GPU memory for the KV cache
  under --mem-fraction-static=F.`; with --max-total-tokens set, a profiled value of 0 or
  less in `max_total_tokens=T is larger than the profiled value P`), and a pool smaller
  than the context length: SGLang starts, but clamps every request below the pool, so not
  one full-length sequence fits.
"""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal

from radiance_mcp.core.boot import Boot, Figure, Hit, Missing, RankView, Refusal
from radiance_mcp.core.engines.common import (
    Built,
    LedgerDialect,
    by_rank,
    count,
    derive,
    first,
    last,
    phrase,
    read,
    share,
    size,
    total,
)
from radiance_mcp.core.units import fmt_mib

MARKER = phrase("boot", "server_args=", r"server_args=ServerArgs\(", "server_args=ServerArgs(...)")

FRACTION = "--mem-fraction-static"
"""The flag whose share of the card SGLang claims for weights and the KV pool."""

PHRASES = (
    MARKER,
    phrase("load_begin", "Load weight begin", r"Load weight begin\. avail mem=(?P<avail>{NUM}) ?GB",
           "Load weight begin. avail mem=X GB"),
    phrase("load_end", "Load weight end",
           r"Load weight end\.[^\n]*?avail mem=(?P<avail>{NUM}) ?GB, mem usage=(?P<usage>{NUM}) ?GB",
           "Load weight end. ... avail mem=X GB, mem usage=W GB"),
    phrase("kv_alloc", "KV Cache is allocated",
           r"KV Cache is allocated\. (?:dtype: [^,\s]++, )?(?:#tokens: (?P<tokens>{NUM}), )?+"
           r"(?:K size: (?P<k>{NUM}) ?GB, V size: (?P<v>{NUM}) ?GB|KV size: (?P<kv>{NUM}) ?GB)",
           "KV Cache is allocated. #tokens: N, K size: K GB, V size: V GB"),
    phrase("pool_end", "Memory pool end", r"Memory pool end\. avail mem=(?P<avail>{NUM}) ?GB",
           "Memory pool end. avail mem=X GB"),
    phrase("graph_begin", "Capture cuda graph begin", r"Capture cuda graph begin\..*?avail mem=(?P<avail>{NUM}) ?GB",
           "Capture cuda graph begin. ... avail mem=X GB"),
    phrase("graph_end", "Capture cuda graph end",
           r"Capture cuda graph end\..*?mem usage=(?P<usage>{NUM}) ?GB\. avail mem=(?P<avail>{NUM}) ?GB",
           "Capture cuda graph end. ... mem usage=G GB. avail mem=X GB."),
    phrase("graph_capture", "Capture cuda graph", r"Capture cuda graph (?:begin|end)\.",
           "Capture cuda graph begin. (before 2025: without avail mem)"),
    phrase("graph_progress", "Capturing batches", r"Capturing batches \(",
           "Capturing batches (bs=N avail_mem=X GB): ...% (the capture's progress bar)"),
    phrase("summary", "max_total_num_tokens=", r"\bmax_total_num_tokens=(?P<pairs>.++)",
           "max_total_num_tokens=N, ..., max_running_requests=R, context_len=C, available_gpu_mem=X GB"),
    phrase("fraction", "mem_fraction_static=", r"\bmem_fraction_static=(?P<fraction>{NUM})",
           "server_args=ServerArgs(..., mem_fraction_static=F, ...)"),
    phrase("not_enough", "Not enough memory", r"Not enough memory\. Please try to increase --mem-fraction-static",
           "Not enough memory. Please try to increase --mem-fraction-static."),
    phrase("not_enough", "leave no GPU memory for the KV cache",
           r"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=(?P<fraction>{NUM})",
           "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=F."),
    phrase("profiled", "larger than the profiled value",
           r"max_total_tokens=(?P<asked>\d++) is larger than the profiled value (?P<profiled>-?\d++)",
           "max_total_tokens=T is larger than the profiled value P. Use the profiled value instead."),
    # The server is up: its HTTP server started (after the scheduler sized the pool), then its warm-up passed.
    phrase("ready", "Uvicorn running on", r"Uvicorn running on", "INFO:     Uvicorn running on http://HOST:PORT"),
    phrase("ready", "fired up and ready to roll", r"The server is fired up and ready to roll",
           "The server is fired up and ready to roll!"),
)

_PREFIX = re.compile(r"\[(?P<inside>[^\[\]\n]{1,160}+)\]", re.ASCII)
_PLACE = re.compile(r"(?:DP|PP|TP)\d++", re.ASCII)
_PAIR = re.compile(r"(?<![a-z_])(?P<name>[a-z_]++)=(?P<value>[^,\s]++)")
INFO = "keep the start-up's INFO lines of every TP rank (SGLang's default --log-level info)"

GAPS = (
    Missing("weights_mib", "'Load weight end. ... mem usage=W GB'", INFO),
    Missing("kv_mib", "'KV Cache is allocated. #tokens: N, K size: K GB, V size: V GB'", INFO),
    Missing("kv_tokens", "'KV Cache is allocated. #tokens: N' or max_total_num_tokens=", INFO),
    Missing("kv_bytes_per_token", "K size + V size over #tokens", "needs the 'KV Cache is allocated' line"),
    Missing("activation_mib", "nothing: SGLang keeps (1 - --mem-fraction-static) of the card back for activations "
            "and prints no figure for their peak", "measure it under load (nvidia-smi) if the procedure needs it"),
    Missing("graph_mib", "'Capture cuda graph end. ... mem usage=G GB'",
            "absent under --disable-cuda-graph; otherwise " + INFO),
    Missing("free_mib", "available_gpu_mem= of the scheduler's summary, or 'Capture cuda graph end ... avail mem'",
            INFO + "; the summary is printed once the server is ready"),
    Missing("floor_mib", "(1 - mem_fraction_static=) x 'Load weight begin. avail mem=X GB'",
            INFO + "; the floor needs the server_args line and the rank's 'Load weight begin' line"),
    Missing("window_tokens", "context_len= of the scheduler's summary", INFO + "; the window is --context-length"),
    Missing("full_length_sequences", "#tokens / context_len", "needs the pool's tokens and context_len="),
)


def rank_of(text: str) -> str | None:
    """The rank a line's prefix names: its DP, PP and TP tags in order ('DP3 TP3', 'PP1 TP0'), or None.

    Other tags (EP, ATTN_CP, MOE_DP) name no card of their own and are left out; a prefix
    without a TP tag names no rank.
    """
    for prefix in _PREFIX.finditer(text):
        tags = [tag for tag in prefix["inside"].split() if _PLACE.fullmatch(tag)]
        if any(tag.startswith("TP") for tag in tags):
            return " ".join(tags)
    return None


def _pairs(hit: Hit) -> dict[str, str]:
    return {"max_total_num_tokens": hit.raw("pairs").split(",", 1)[0].strip()} | {
        m["name"]: m["value"] for m in _PAIR.finditer(hit.raw("pairs"))}


def _summary_figure(hit: Hit, pairs: dict[str, str], name: str, unit: str) -> Figure | None:
    if name not in pairs or not pairs[name].isdigit():
        return None
    return Figure(Decimal(pairs[name]), unit, (hit.line,))


def _floor(load_begin: Hit | None, fraction: Hit | None) -> Figure | None:
    """What --mem-fraction-static keeps back: (1 - F) x the memory SGLang found before loading.

    SGLang sizes its pool as (free memory after the weights) - total x (1 - F), where total is
    the memory available before the weights ('Load weight begin. avail mem=X GB').
    """
    if load_begin is None or fraction is None:
        return None
    total, kept = size(load_begin, "avail", "GB"), 1 - fraction.number("fraction")  # a share: checked in _build
    value = total.value * kept
    return Figure(value, "MiB", (load_begin.line, fraction.line), total.resolution * kept,
                  f"avail mem before the weights x (1 - mem_fraction_static): {fmt_mib(total.value, 2)} x {kept} = "
                  f"{fmt_mib(value, 2)} MiB")


def _rank_view(rank: str, groups: list[dict[str, list[Hit]]], graphs: bool, unmeasured: bool) -> RankView:
    """One rank's figures. `graphs`: the boot captures CUDA graphs (any rank printed the capture), so
    'Memory pool end. avail mem' is not yet where the rank settles, though its own capture lines may be cut.
    `unmeasured`: its capture lines print no memory (SGLang before 2025), so no free figure follows the pool.
    """
    load_end = first(groups, "load_end")
    weights = size(load_end, "usage", "GB") if load_end else None
    kv_mib = kv_tokens = free = window = None
    if (alloc := first(groups, "kv_alloc")) is not None:
        kv_tokens = count(alloc, "tokens") if alloc.fields.get("tokens") else None  # before 2025: no #tokens
        if alloc.fields.get("kv") is not None:
            kv_mib = size(alloc, "kv", "GB")
        else:
            kv_mib = total([size(alloc, "k", "GB"), size(alloc, "v", "GB")], "K size + V size")
    graph_end = first(groups, "graph_end")
    if (summary := first(groups, "summary")) is not None:
        pairs = _pairs(summary)
        kv_tokens = kv_tokens or _summary_figure(summary, pairs, "max_total_num_tokens", "tokens")
        window = _summary_figure(summary, pairs, "context_len", "tokens")
        if "available_gpu_mem" in pairs:
            free = size(Hit(summary.key, summary.line, {"x": pairs["available_gpu_mem"]}, summary.rank), "x", "GB")
    if free is None and graph_end is not None:
        free = size(graph_end, "avail", "GB")
    pool_end = last(groups, "pool_end")
    if free is None and not graphs and pool_end is not None:
        free = size(pool_end, "avail", "GB")  # no CUDA graphs follow the pool: this is where it settles
    view = RankView(rank, weights, kv_mib, kv_tokens, None, None,
                    size(graph_end, "usage", "GB") if graph_end else None, free, window,
                    floor_mib=_floor(first(groups, "load_begin"), first(groups, "fraction")))
    gaps: tuple[Missing, ...] = GAPS
    if free is None and unmeasured and pool_end is not None:
        gaps = tuple(replace(g, remedy=_BEFORE_GRAPHS.format(line=pool_end.line.number)) if g.figure == "free_mib"
                     else g for g in GAPS)
    return derive(view, gaps)


_BEFORE_GRAPHS = (
    "line {line}'s 'Memory pool end. avail mem' is read before the CUDA graphs are captured, so it overstates what "
    "is left, and this boot prints no free memory after the capture (no avail mem on its 'Capture cuda graph end' "
    "line, no available_gpu_mem= in its summary: SGLang before 2025 prints none). Read the card's free memory "
    "(nvidia-smi) once the server is up")


def _refusals(hits: list[Hit], views: tuple[RankView, ...]) -> tuple[Refusal, ...]:
    refusals = [Refusal("not_enough_memory", hit.line, (
        "SGLang refused to start: after the weights, --mem-fraction-static leaves no room for a KV pool. Raise "
        "--mem-fraction-static (it is weights + KV pool as a share of the card), or serve on more GPUs (--tp)"))
        for hit in hits if hit.key == "not_enough"]
    for hit in hits:
        if hit.key == "profiled" and int(hit.raw("profiled")) <= 0:
            refusals.append(Refusal("not_enough_memory", hit.line, (
                f"SGLang's profile left a KV pool of {int(hit.raw('profiled')):,} tokens: after the weights, "
                "--mem-fraction-static leaves no room for one, and the boot fails. Raise --mem-fraction-static, or "
                "serve on more GPUs (--tp)")))
            break  # every rank prints it: one line names the boot's refusal
    for view in views:
        if view.kv_tokens and view.window_tokens and view.kv_tokens.value < view.window_tokens.value:
            refusals.append(Refusal("pool_below_window", view.window_tokens.lines[0], (
                f"{view.rank}: the KV pool of {fmt_mib(view.kv_tokens.value)} tokens cannot hold one sequence at the "
                f"context length of {fmt_mib(view.window_tokens.value)} tokens; "
                "SGLang caps every request below the pool. "
                "Raise --mem-fraction-static (or --max-total-tokens), or lower --context-length")))
            break
    return tuple(refusals)


def _build(hits: list[Hit]) -> Built:
    order, grouped = by_rank(hits)
    shared = grouped.get(None, {})
    graphs = any(hit.key in ("graph_begin", "graph_end", "graph_capture", "graph_progress") for hit in hits)
    measured = {hit.line.number for hit in hits if hit.key in ("graph_begin", "graph_end")}
    unmeasured = any(hit.key == "graph_capture" and hit.line.number not in measured for hit in hits)
    if (fraction := first([*grouped.values()], "fraction")) is not None:  # one line (ONCE), before any floor of it
        share(fraction, fraction.number("fraction"), "mem_fraction_static", "SGLang", FRACTION)
    views = tuple(_rank_view(r, [grouped.get(r, {}), shared], graphs, unmeasured) for r in order or ["engine"])
    settings: dict[str, Figure] = {}
    if (summary := first([*grouped.values()], "summary")) is not None:
        for name, unit in (("max_running_requests", "sequences"), ("chunked_prefill_size", "tokens")):
            if (figure := _summary_figure(summary, _pairs(summary), name, unit)) is not None:
                settings[name] = figure
    if fraction is not None:
        settings["mem_fraction_static"] = count(fraction, "fraction", "fraction")
    return Built(views, _refusals(hits, views), settings)


ONCE = frozenset({"load_end", "kv_alloc", "summary", "not_enough", "fraction", "profiled"})
DIALECT = LedgerDialect("sglang", PHRASES, MARKER, ONCE, rank_of, _build, finished=frozenset({"ready"}),
                       sizes_kv=frozenset({"kv_alloc", "summary"}))


def read_sglang(text: str, *, source: str, boot: int = -1) -> Boot:
    """Read one SGLang boot (the newest by default) into its typed view."""
    return read(DIALECT, text, source=source, boot=boot)

