"""vLLM's start-up ledger: its phrase table and the typed view of one boot.

What vLLM prints (the V0 engine of 0.2 to 0.8, and V1, the default from 0.8): the weights
(`Model loading took X GiB`, earlier `Loading model weights took X GB`; vLLM's "GB" is GiB,
it divides by 2**30), the
memory profile (0.6: `Memory profiling results: total_gpu_memory=... kv_cache_size=...`;
0.7-0.8: `model weights take ...; PyTorch activation peak memory takes ...; the rest of the
memory reserved for KV Cache is ...`; V1: `Available KV cache memory: X GiB`, or under
--kv-cache-memory-bytes, which skips the profile, `reserved X GiB memory for KV Cache as specified
by kv_cache_memory_bytes`), the KV tokens
(V1: `GPU KV cache size: N tokens`; V0: `# GPU blocks: B`, in blocks of --block-size
tokens, which it does not print: the one size of 1, 8, 16, 32, 64, 128 whose B x size / L
gives the `Maximum concurrency` line's C at two decimals decides it), the window (`Maximum
concurrency for L tokens per request: Cx`, or `max_seq_len=`
in the engine's config line), CUDA graphs (`Graph capturing finished in N secs, took X GiB`)
and, from 0.21, the `--gpu-memory-utilization` equivalence line. Per rank, under tensor
parallelism, lines carry a `(Worker_TPn pid=...)` prefix (early V1: `(VllmWorker rank=n
pid=...)`; V0's `(VllmWorkerProcess pid=N)` names no rank, and of its workers' profile lines
the one with the least KV memory binds, as V0 gives every worker the fewest blocks any can
hold); the KV tokens are the engine's (each rank holds its heads' share of every
token), so bytes per token is per rank. For a model whose layers are not all full
attention (linear-attention/Mamba or sliding-window layers) vLLM's KV tokens are no pool of
full-length-sequence tokens: where its `Maximum concurrency` figure disagrees with tokens /
window, the full-length sequences are that figure, and no bytes per token is made of the pair.

The procedures in vLLM's terms:
- Settled free: vLLM claims `--gpu-memory-utilization` x the card's total (default 0.9) for
  weights, activation peak, non-torch memory and the KV cache, and leaves the rest free; from
  0.21 CUDA graph memory is profiled inside that claim. The floor is that (1 - utilization)
  share of the card: memory free above it is memory the KV cache could have had.
- The flag that moves the KV memory: `--gpu-memory-utilization` (a share of the card), or
  `--kv-cache-memory-bytes` (bytes, bypassing the profile, in recent versions). `--max-model-len` moves
  the window, `--block-size` the block.
- Refused boots: the window exceeds what the KV cache holds (V0: `The model's max seq len (W)
  is larger than the maximum number of tokens that can be stored in KV cache (T)`; V1: `To serve
  at least one request with the model's max seq len (W), (X GiB KV cache is needed, which is
  larger than the available KV cache memory (Y GiB)`, from 2026 without the second parenthesis
  and across three lines), and no
  memory for the KV cache at all (`No available memory for the cache blocks`, `# GPU blocks:
  0`, a profile reserving less than 0 GiB for the KV cache, V0's or V1's); where no line says
  why, V1's `EngineCore failed to start.` (the traceback after it, which names the cause, may
  be cut from the log).
"""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal
from functools import partial

from radiance_mcp.core.boot import Boot, Figure, Hit, Missing, RankView, Refusal
from radiance_mcp.core.engines.common import (
    NUM,
    Built,
    LedgerDialect,
    by_rank,
    bytes_per_token,
    count,
    derive,
    difference,
    first,
    phrase,
    read,
    share,
    size,
)
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.units import fmt_mib

MARKER = phrase("boot", "", r"Initializing an? (?:V\d++ )?LLM engine|vLLM API server version",
                "Initializing a(n) ... LLM engine ... with config")

PHRASES = (
    MARKER,
    phrase("config_window", "max_seq_len=", r"LLM engine.*?\bmax_seq_len=(?P<window>\d++)",
           "max_seq_len= in the engine's config line"),
    phrase("weights", "Model loading took", r"Model loading took (?P<size>{NUM}) ?(?P<unit>GiB|GB)\b",
           "Model loading took X GiB memory"),
    phrase("weights", "Loading model weights took",
           r"Loading model weights took (?P<size>{NUM}) ?(?P<unit>GiB|GB)\b", "Loading model weights took X GB"),
    phrase("profile_v06", "Memory profiling results:", r"Memory profiling results: (?P<pairs>.++)",
           "Memory profiling results: total_gpu_memory=... kv_cache_size=..."),
    phrase("usable_v08", "the current vLLM instance can use",
           r"total_gpu_memory \((?P<total>{NUM}) ?GiB\) x gpu_memory_utilization \((?P<util>{NUM})\) "
           r"= (?P<usable>{NUM}) ?GiB", "the current vLLM instance can use total_gpu_memory (X GiB) x ..."),
    phrase("breakdown_v08", "reserved for KV Cache",
           r"model weights take (?P<weights>{NUM}) ?GiB; non_torch_memory takes (?P<non_torch>{NUM}) ?GiB; "
           r"PyTorch activation peak memory takes (?P<activation>{NUM}) ?GiB; the rest of the memory "
           r"reserved for KV Cache is (?P<negative>-)?+(?P<kv>{NUM}) ?GiB",
           "the rest of the memory reserved for KV Cache is X GiB"),
    phrase("available", "Available KV cache memory",
           r"Available KV cache memory: (?P<negative>-)?+(?P<kv>{NUM}) ?(?P<unit>GiB|GB)\b",
           "Available KV cache memory: X GiB"),
    phrase("available", "as specified by kv_cache_memory_bytes",
           r"reserved (?P<kv>{NUM}) ?(?P<unit>GiB|GB) memory for KV Cache as specified by kv_cache_memory_bytes",
           "Initial free memory X GiB, reserved Y GiB memory for KV Cache as specified by kv_cache_memory_bytes ..."),
    phrase("kv_tokens", "KV cache size:", r"GPU KV cache size: (?P<tokens>{NUM}) tokens",
           "GPU KV cache size: N tokens"),
    phrase("blocks", "blocks:", r"(?:^|[#\s])(?P<device>(?!CPU\b)[A-Za-z]++) blocks: (?P<blocks>{NUM})",
           "# GPU blocks: B"),
    phrase("concurrency", "Maximum concurrency for",
           r"Maximum concurrency for (?P<window>{NUM}) tokens per request: (?P<ratio>{NUM})x",
           "Maximum concurrency for L tokens per request: Cx"),
    phrase("graphs", "Graph capturing finished",
           r"Graph capturing finished in {NUM} secs?, took (?P<size>{NUM}) ?(?P<unit>GiB|GB)\b",
           "Graph capturing finished in N secs, took X GiB"),
    phrase("equivalence", "is equivalent to --gpu-memory-utilization",
           r"current --gpu-memory-utilization=(?P<current>{NUM}) is equivalent to "
           r"--gpu-memory-utilization=(?P<equivalent>{NUM}) without CUDA graph memory profiling",
           "The current --gpu-memory-utilization=U is equivalent to ..."),
    phrase("refused_v0", "that can be stored in KV cache",
           r"max seq len \((?P<window>{NUM})\) is larger than the maximum number of tokens that can be "
           r"stored in KV cache \((?P<tokens>{NUM})\)",
           "The model's max seq len (W) is larger than the maximum number of tokens ... (T)"),
    phrase("no_cache_memory", "No available memory for the cache blocks",
           r"No available memory for the cache blocks\. Try increasing",
           "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` ..."),
    phrase("failed", "EngineCore failed to start", r"EngineCore failed to start\.",
           "EngineCore failed to start."),
    # V1's refusal of a window it cannot hold, on one line or (from 2026) on three: its window, its pair, its estimate
    phrase("serve_window", "To serve at least one request",
           r"To serve at least one request with the models?'s max seq len \((?P<window>{NUM})\)",
           "To serve at least one request with the model's max seq len (W), ..."),
    # The engine is up (its profile, KV cache and warm-up done), then its API server starts.
    phrase("ready", "init engine (profile", r"init engine \(profile, create kv cache, warmup model\) took",
           "init engine (profile, create kv cache, warmup model) took N seconds"),
    phrase("ready", "Starting vLLM API server", r"Starting vLLM API server", "Starting vLLM API server on http://HOST:PORT"),
    phrase("refused_v1", "KV cache is needed",
           r"(?<![\d.,])(?P<needed>{NUM}) ?GiB KV cache is needed, which is larger than the available KV cache memory "
           r"\((?P<available>{NUM}) ?GiB\)",
           "(X GiB KV cache is needed, which is larger than the available KV cache memory (Y GiB)"),
    phrase("estimate", "estimated maximum model length is", r"estimated maximum model length is (?P<estimate>{NUM})",
           "Based on the available memory, the estimated maximum model length is N"),
)

_RANK = re.compile(
    r"\((?:Worker_(?P<rank>[A-Z]{2}\d++(?:_[A-Z]{2}\d++)*+)|VllmWorker(?:Process)? rank=(?P<n>\d++)) pid=",
    re.ASCII,
)
_PAIR = re.compile(rf"(?<![a-z_])(?P<name>[a-z_]++)=(?P<value>{NUM})(?P<unit>GiB)?", re.ASCII)
UTILIZATION = "--gpu-memory-utilization"
INFO = "keep the start-up's INFO lines (vLLM logs them by default; VLLM_LOGGING_LEVEL=INFO)"


def rank_of(text: str) -> str | None:
    found = _RANK.search(text)
    if found is None:
        return None
    return found["rank"] or f"rank{found['n']}"  # V1 of 2025: (Worker_TP1 pid=..); early V1: (VllmWorker rank=1 pid=..)


def gaps(block_size_tokens: int | None) -> tuple[Missing, ...]:
    blocks_remedy = (
        "a V0 boot prints '# GPU blocks: B' only: its tokens are B x the server's --block-size (16 tokens "
        "unless set), which the log does not print; read a boot that prints 'GPU KV cache size: N tokens', or (in "
        "Python) pass block_size_tokens" if block_size_tokens is None else INFO
    )
    return (
        Missing("weights_mib", "'Model loading took X GiB memory'", INFO),
        Missing("kv_mib", "'Available KV cache memory: X GiB' (V1) or the memory profiling line (V0)", INFO),
        Missing("kv_tokens", "'GPU KV cache size: N tokens' (V1) or '# GPU blocks: B' (V0)", blocks_remedy),
        Missing("kv_bytes_per_token", "KV memory / KV tokens", "needs both of the lines above"),
        Missing("activation_mib", "the memory profiling line (V0); V1 logs its profile at DEBUG",
                "set VLLM_LOGGING_LEVEL=DEBUG for the profile of a V1 boot"),
        Missing("graph_mib", "'Graph capturing finished in N secs, took X GiB'",
                "absent under --enforce-eager (no CUDA graphs); otherwise " + INFO),
        Missing("free_mib", "total_gpu_memory and gpu_memory_utilization of the profiling line (V0)",
                "a V1 boot logs the card's total at DEBUG only (VLLM_LOGGING_LEVEL=DEBUG); or read the card's "
                "free memory (nvidia-smi) once the server is up"),
        Missing("floor_mib", "total_gpu_memory and gpu_memory_utilization of the memory profiling line (V0)",
                "a V1 boot prints neither at INFO: the floor is (1 - --gpu-memory-utilization) x the card's total "
                "(nvidia-smi --query-gpu=memory.total); VLLM_LOGGING_LEVEL=DEBUG prints the profile"),
        Missing("window_tokens", "'Maximum concurrency for L tokens per request' or max_seq_len= in the config line",
                INFO + "; the window is the server's --max-model-len"),
        Missing("full_length_sequences", "KV tokens / window", "needs the KV tokens and the window"),
    )


def _gib(hit: Hit, name: str) -> Figure:
    return size(hit, name, "GiB")


def _pairs(hit: Hit) -> dict[str, str]:
    return {m["name"]: m["value"] for m in _PAIR.finditer(hit.raw("pairs"))}


def _pair(hit: Hit, pairs: dict[str, str], name: str) -> Figure:
    if name not in pairs:
        raise LedgerError(f"line {hit.line.number}: the memory profiling line has no {name}=: {hit.line.text!r}")
    return _gib(Hit(hit.key, hit.line, {name: pairs[name]}, hit.rank), name)


def _floor(total: Figure, util: Decimal) -> Figure:
    """The share of the card vLLM leaves unclaimed by design: total x (1 - --gpu-memory-utilization)."""
    left = total.value * (1 - util)
    return Figure(left, "MiB", total.lines, total.resolution * (1 - util),
                  f"total_gpu_memory x (1 - gpu_memory_utilization): {fmt_mib(total.value, 2)} x (1 - {util}) "
                  f"= {fmt_mib(left, 2)} MiB")


def _least_kv(groups: list[dict[str, list[Hit]]]) -> Hit | None:
    """The V0 profile line that binds: the engine gives every worker the fewest blocks any worker can hold,
    and its tensor-parallel workers' lines (`(VllmWorkerProcess pid=N)`) name no rank, so of several such
    lines the one with the least KV memory is the one the blocks were sized by."""
    for group in groups:
        if group.get("breakdown_v08"):
            return min(group["breakdown_v08"], key=_profiled_kv)
    return None


def _signed(reserved: Figure, hit: Hit) -> Figure:
    """The KV memory a line reserves, below 0 where the profile left nothing for the KV cache (a refused boot)."""
    return replace(reserved, value=-reserved.value) if hit.fields.get("negative") else reserved


def _profiled_kv(hit: Hit) -> Decimal:
    """The KV memory a V0 profile line reserves, in GiB; below 0 where the profile left none."""
    return -hit.number("kv") if hit.fields.get("negative") else hit.number("kv")


def _rank_view(rank: str, groups: list[dict[str, list[Hit]]], block_size_tokens: int | None) -> RankView:
    weights = first(groups, "weights")
    weights_mib = size(weights, "size", weights.raw("unit")) if weights else None
    kv_mib = kv_tokens = rate = activation = free = floor = window = None
    undecided = ""
    if (hit := first(groups, "available")) is not None:
        kv_mib = _signed(size(hit, "kv", hit.raw("unit")), hit)
    if (hit := _least_kv(groups)) is not None:
        weights_mib = weights_mib or _gib(hit, "weights")
        kv_mib = kv_mib or _signed(_gib(hit, "kv"), hit)
        activation = _gib(hit, "activation")
    if (hit := first(groups, "usable_v08")) is not None:
        share(hit, Decimal(hit.raw("util")), "gpu_memory_utilization", "vLLM", UTILIZATION)
        # What the instance leaves of the card is, by design, all the floor: forgone is 0, not rounding noise.
        free = floor = difference(_gib(hit, "total"), _gib(hit, "usable"), "card total - what the instance may use")
    if (hit := first(groups, "profile_v06")) is not None:
        pairs = _pairs(hit)
        kv_mib = kv_mib or _pair(hit, pairs, "kv_cache_size")
        total, util = _pair(hit, pairs, "total_gpu_memory"), Decimal(pairs.get("gpu_memory_utilization", "0"))
        if "gpu_memory_utilization" in pairs:
            share(hit, util, "gpu_memory_utilization", "vLLM", UTILIZATION)
        if util:
            free = floor = _floor(total, util)
        if weights_mib is not None:
            activation = difference(_pair(hit, pairs, "peak_torch_memory"), weights_mib, "peak torch memory - weights")
    if (hit := first(groups, "kv_tokens")) is not None:
        kv_tokens = count(hit, "tokens")
    elif (hit := first(groups, "refused_v0")) is not None:
        kv_tokens = count(hit, "tokens")
    elif (hit := first(groups, "blocks")) is not None and block_size_tokens is not None:
        blocks = hit.number("blocks")
        kv_tokens = Figure(blocks * block_size_tokens, "tokens", (hit.line,), Decimal(0),
                           f"{blocks:,} blocks x {block_size_tokens} tokens (block_size_tokens) "
                           f"= {blocks * block_size_tokens:,} tokens")
    elif (hit := first(groups, "blocks")) is not None:
        kv_tokens, undecided = _tokens_of_blocks(hit, first(groups, "concurrency"))
    if (hit := first(groups, "refused_v1")) is not None:
        kv_mib = kv_mib or _gib(hit, "available")
        if (asked := first(groups, "serve_window")) is not None:  # the refusal's own pair: X GiB for W tokens
            rate = bytes_per_token(_gib(hit, "needed"), count(asked, "window"))
    for key in ("concurrency", "config_window", "refused_v0", "serve_window"):
        if window is None and (hit := first(groups, key)) is not None:
            window = count(hit, "window")
    graphs = first(groups, "graphs")
    mixed = _mixed_layers(kv_tokens, first(groups, "concurrency"), block_size_tokens)
    view = RankView(rank, weights_mib, kv_mib, kv_tokens, rate, activation,
                    size(graphs, "size", graphs.raw("unit")) if graphs else None, free, window, mixed, floor)
    found = gaps(block_size_tokens)
    if kv_mib is None and first(groups, "blocks") is not None:
        found = _with_remedy(found, "kv_mib", BLOCKS_ONLY)
    if undecided:
        found = _with_remedy(found, "kv_tokens", undecided)
    if mixed is not None:
        found = _with_remedy(found, "kv_bytes_per_token", MIXED_LAYERS)
    empty = kv_tokens is not None and kv_tokens.value <= 0  # no cache at all: no rate can be made of it
    return derive(view, found, rate_from_pair=mixed is None and not empty)


BLOCK_SIZES = (1, 8, 16, 32, 64, 128)
"""The block sizes vLLM takes (--block-size): a V0 boot prints its blocks, not their size."""


def _tokens_of_blocks(blocks: Hit, concurrency: Hit | None) -> tuple[Figure | None, str]:
    """V0's KV tokens from its blocks line: B x the one block size of BLOCK_SIZES that reproduces the
    `Maximum concurrency for L tokens per request: Cx` line (vLLM prints B x size / L to two decimals).

    Returns the tokens (0 for 0 blocks, whatever their size), or None and why they are not decided:
    no concurrency line (the default remedy stands: ""), two sizes that both give C, or none that does.
    """
    count_ = int(blocks.number("blocks"))
    if count_ == 0:
        return Figure(Decimal(0), "tokens", (blocks.line,), Decimal(0),
                      "0 blocks: no KV cache, whatever the block size"), ""
    if concurrency is None or int(concurrency.number("window")) <= 0:
        return None, ""
    window, printed = int(concurrency.number("window")), concurrency.number("ratio")

    def shown(size: int) -> Decimal:
        return Decimal(f"{count_ * size / window:.2f}")  # as vLLM formats its float: %.2f

    fits = [size for size in BLOCK_SIZES if shown(size) == printed]
    sizes = ", ".join(map(str, BLOCK_SIZES))
    remedy = "pass block_size_tokens (the server's --block-size), or read a boot that prints 'GPU KV cache size'"
    if len(fits) > 1:
        named = f"{', '.join(map(str, fits[:-1]))} and {fits[-1]} {'both' if len(fits) == 2 else 'all'}"
        return None, (f"not decided: block sizes {named} give {printed}x for "
                      f"{window:,} tokens from {count_:,} blocks (lines {blocks.line.number} and "
                      f"{concurrency.line.number}); {remedy}")
    if not fits:
        return None, (f"not decided: no block size vLLM takes ({sizes}) gives the {printed}x of line "
                      f"{concurrency.line.number} from {count_:,} blocks of line {blocks.line.number}; {remedy}")
    (size,) = fits
    others = "; ".join(f"{s} gives {shown(s)}x" for s in BLOCK_SIZES
                       if s != size and abs(BLOCK_SIZES.index(s) - BLOCK_SIZES.index(size)) == 1)
    tokens = count_ * size
    return Figure(Decimal(tokens), "tokens", (blocks.line, concurrency.line), Decimal(0),
                  f"{count_:,} blocks x {size} tokens = {tokens:,} tokens: of the block sizes vLLM takes ({sizes}), "
                  f"only {size} gives its {printed}x for {window:,} tokens ({count_:,} x {size} / {window:,} = "
                  f"{shown(size)}; {others})"), ""


BLOCKS_ONLY = ("this vLLM prints its KV cache in blocks only (before 0.6 it logs no KV memory at INFO); read the "
               "boot of a vLLM that prints its memory profile (0.6 and later), or set VLLM_LOGGING_LEVEL=DEBUG")
MIXED_LAYERS = ("vLLM's 'Maximum concurrency' line disagrees with its KV tokens over the window, as it does for models "
                "with linear-attention (Mamba) or sliding-window layers, whose KV tokens are no pool of full-attention "
                "tokens: the KV memory over those tokens prices no full-length sequence. Size the pool by vLLM's "
                "own concurrency figure (full_length_sequences), or by the model's per-token bytes for its "
                "full-attention layers")


def _with_remedy(found: tuple[Missing, ...], figure: str, remedy: str) -> tuple[Missing, ...]:
    return tuple(replace(g, remedy=remedy) if g.figure == figure else g for g in found)


def _mixed_layers(tokens: Figure | None, concurrency: Hit | None, block_size_tokens: int | None) -> Figure | None:
    """vLLM's own concurrency figure, where its KV tokens over the window do not give it (beyond the line's
    rounding to 0.01); None where they do, so the sequences are worked from the tokens as for any engine.

    Tokens worked from V0's blocks with a caller's block size that disagree are the wrong block size: refused.
    """
    if tokens is None or concurrency is None:
        return None
    window, printed = concurrency.number("window"), concurrency.number("ratio")
    if window <= 0 or abs(tokens.value / window - printed) <= Decimal("0.005"):
        return None
    worked = tokens.value / window
    if block_size_tokens is not None and tokens.arithmetic:
        raise LedgerError(
            f"block_size_tokens={block_size_tokens} gives {tokens.value:,} KV tokens, {worked:.2f} sequences of "
            f"{window:,}, where line {concurrency.line.number} prints {printed}x: pass the server's --block-size "
            "(16 unless set)")
    return Figure(printed, "sequences", (concurrency.line,), Decimal("0.01"),
                  f"vLLM's own figure, {printed}x: its {tokens.value:,} KV tokens / {window:,} tokens = "
                  f"{worked:.2f} do not give it (layers that are not full attention)")


def _no_cache(hits: list[Hit]) -> Refusal | None:
    """A boot whose profile left no memory for the KV cache: vLLM's error line, else its 0 blocks, else a
    profile line reserving less than nothing (an excerpt may hold one without the others)."""
    said = [(h, "no memory was left for the KV cache blocks") for h in hits if h.key == "no_cache_memory"]
    zero = [(h, "the KV cache got 0 blocks") for h in hits if h.key == "blocks" and h.number("blocks") == 0]
    below = [(h, f"the memory profile left -{h.raw('kv')} GiB for the KV cache") for h in hits
             if h.key in ("breakdown_v08", "available") and h.fields.get("negative")]
    for hit, why in said or zero or below:
        return Refusal("not_enough_memory", hit.line, (
            f"vLLM refused to start: {why}, so not one token fits in it. Raise --gpu-memory-utilization (or set "
            "--kv-cache-memory-bytes), lower --max-model-len or --max-num-batched-tokens (the profile's activation "
            "peak), or serve on more GPUs (--tensor-parallel-size)"))
    return None


def _refusals(hits: list[Hit]) -> tuple[Refusal, ...]:
    """The boot's refusals: each line that names what vLLM refused; where none does, its engine core's own
    'EngineCore failed to start.' (the error after it, which names the cause, may not be in the log)."""
    refusals = _named_refusals(hits)
    failed = next((h for h in hits if h.key == "failed"), None)
    if refusals or failed is None:
        return refusals
    return (Refusal("startup_failed", failed.line, (
        "vLLM failed to start: its engine core stopped during start-up, and no line the log holds says why "
        "(the traceback after this line names the cause). Read the lines after it, fix what they name (often "
        "--gpu-memory-utilization, --max-model-len or --kv-cache-memory-bytes), and start it again")),)


def _named_refusals(hits: list[Hit]) -> tuple[Refusal, ...]:
    refusals = [refusal] if (refusal := _no_cache(hits)) is not None else []
    for hit in hits:
        if hit.key == "refused_v0":
            window, tokens = hit.number("window"), hit.number("tokens")
            refusals.append(Refusal("window_exceeds_kv", hit.line, (
                f"vLLM refused to start: the window of {window:,} tokens exceeds the {tokens:,} tokens its KV cache "
                f"holds. Raise --gpu-memory-utilization (or set --kv-cache-memory-bytes), or lower --max-model-len to "
                f"{tokens:,} or less")))
        elif hit.key == "refused_v1":
            asked = next((h for h in hits if h.key == "serve_window"), None)
            at = f" at the window of {asked.number('window'):,} tokens" if asked else ""
            estimate = next((h.raw("estimate") for h in hits if h.key == "estimate"), None)
            fits = f"; vLLM estimates a window of {estimate} tokens fits" if estimate else ""
            refusals.append(Refusal("window_exceeds_kv", hit.line, (
                f"vLLM refused to start: one sequence{at} needs "
                f"{hit.raw('needed')} GiB of KV cache, more than the {hit.raw('available')} GiB available{fits}. "
                "Raise --gpu-memory-utilization (or set --kv-cache-memory-bytes), or lower --max-model-len")))
    return tuple(refusals)


def _build(block_size_tokens: int | None, hits: list[Hit]) -> Built:
    order, grouped = by_rank(hits)
    shared = grouped.get(None, {})
    views = tuple(_rank_view(r, [grouped.get(r, {}), shared], block_size_tokens) for r in order or ["engine"])
    settings = {}
    if (hit := first([*grouped.values()], "equivalence")) is not None:
        settings = {"gpu_memory_utilization": count(hit, "current", "fraction"),
                    "gpu_memory_utilization_without_graph_profiling": count(hit, "equivalent", "fraction")}
    return Built(views, _refusals(hits), settings)


MARKER_WORDS = ("Initializing", "version")
"""A word of each of MARKER's two lines (its pattern's blanks are runs of any blank, so no word spans one)."""
ONCE = frozenset({"kv_tokens", "blocks", "concurrency", "available", "refused_v0", "serve_window", "refused_v1",
                  "profile_v06"})
"""Printed once a boot (per rank): not the weights, which V0's tensor-parallel workers each print under a prefix
that names no rank (`(VllmWorkerProcess pid=N)`); the blocks line is the driver's alone."""


def dialect(block_size_tokens: int | None = None) -> LedgerDialect:
    if block_size_tokens is not None and block_size_tokens <= 0:
        raise LedgerError(f"block_size_tokens={block_size_tokens}: a vLLM block holds 1 or more tokens (--block-size)")
    return LedgerDialect("vllm", PHRASES, MARKER, ONCE, rank_of, partial(_build, block_size_tokens), MARKER_WORDS,
                         frozenset({"ready"}), SIZES_KV)


SIZES_KV = frozenset({"profile_v06", "breakdown_v08", "available", "kv_tokens", "blocks"})


def read_vllm(text: str, *, source: str, boot: int = -1, block_size_tokens: int | None = None) -> Boot:
    """Read one vLLM boot (the newest by default) into its typed view."""
    return read(dialect(block_size_tokens), text, source=source, boot=boot)
