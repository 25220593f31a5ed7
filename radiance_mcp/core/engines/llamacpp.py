"""llama.cpp's start-up ledger (llama-server, and llama-cpp-python with verbose logs).

What llama.cpp prints, per device (CUDA0, Metal, CPU; host buffers CPU_Mapped, CUDA_Host
and the like are host memory and counted as CPU): the weights (`load_tensors: CUDA0 model
buffer size = X MiB`, before 2025 `llm_load_tensors: CUDA0 buffer size = X MiB`), the KV
cache (`CUDA0 KV buffer size = X MiB`; in total `llama_kv_cache: size = X MiB (N cells, L
layers, S/S seqs), K (f16): ..., V (f16): ...`, named `llama_kv_cache_unified` in mid-2025
and, before that, `KV self size = X MiB, K (f16): ..., V (f16): ...` beside `kv_size = N`; in
2023 `llama_init_from_file: kv self size = X MB`, its MB a MiB, beside `llama_model_load_internal:
n_ctx = N`),
the compute buffers (`CUDA0 compute buffer size = X MiB`), the context (`n_ctx`,
`n_seq_max`, `n_ctx_seq` or `n_ctx_per_seq`, llama-server's `n_slots` / `n_ctx_slot`), and
each device's free memory at load (`using device CUDA0 (...) - X MiB free`). Models with a
sliding window (Gemma 3) print two caches: the full one (n_ctx cells) and the SWA one; the
KV tokens are the full cache's cells, its bytes per token the full cache's own pair, and the
SWA cache's memory counts in the KV memory. A boot starts at `llama_model_loader: loaded
meta data with ...` (a draft model for speculative decoding loads a second model: read such
a log's boot by number).

The procedures in llama.cpp's terms:
- Settled free: a device's free memory at load minus what the boot put on it (model, KV and
  compute buffers). llama.cpp claims no share of the card: the floor is the headroom you
  keep for the driver and other processes; with `--fit` (auto-fit, late 2025) llama.cpp
  sizes the context and offload itself to leave its own margin.
- The flags that move the KV memory: `-c` / `--ctx-size` (cells, shared by all slots) and
  `-np` / `--parallel` (slots: each gets n_ctx / n_parallel unless `--kv-unified`), with
  `-ctk` / `-ctv` (the cache types) setting bytes per cell. llama-cpp-python: `n_ctx`.
- Refused boots: an allocation failure (`cudaMalloc failed: out of memory`, `failed to
  allocate buffer for kv cache`, `failed to allocate compute buffers`, `unable to allocate
  CUDA0 buffer` for the weights), unless llama.cpp says it retries (`retrying without
  pipeline parallelism`) and goes on.
"""

from __future__ import annotations

import re
from dataclasses import replace

from radiance_mcp.core.boot import Boot, Figure, Hit, Missing, RankView, Refusal
from radiance_mcp.core.engines.common import (
    Built,
    LedgerDialect,
    bytes_per_token,
    count,
    derive,
    difference,
    natural,
    phrase,
    read,
    size,
    total,
)

MARKER = phrase("boot", "", r"llama_model_loader: loaded meta data with|using device \S++ \(|\bbuild: \d++ \(",
                "llama_model_loader: loaded meta data with ...")
"""A start-up prints 'build: N (...)' (llama-server), 'using device ...' (GPU builds) and the model
loader's first line; whichever come, they run together into one boot (common._boot_starts)."""
_CTX = r"(?:llama_context|llama_init_from_model|llama_new_context_with_model|llama_model_load_internal):"
"""The functions that print the context's settings, newest first (llama_model_load_internal: 2023)."""

PHRASES = (
    MARKER,
    # The device's description may hold parentheses ('(AMD Radeon (TM) Pro VII (RADV VEGA20))'), and from late
    # 2025 its id follows in a group of its own ('(0000:01:00.0)', '(unknown id)'); from 2026 the function that
    # prints it is llama_prepare_model_devices.
    phrase("device_free", "MiB free",
           r"using device (?P<device>\S++) (?:\((?:[^()\n]++|\([^()\n]*+\))*+\) )++- (?P<free>{NUM}) MiB free",
           "using device CUDA0 (...) - X MiB free"),
    phrase("model_buffer", "buffer size =",
           r"(?:load_tensors|llm_load_tensors): (?P<device>\S++) (?:model )?buffer size = (?P<size>{NUM}) MiB",
           "load_tensors: CUDA0 model buffer size = X MiB"),
    phrase("kv_buffer", "KV buffer size =", r"(?<!\S)(?P<device>\S++) KV buffer size = (?P<size>{NUM}) MiB",
           "CUDA0 KV buffer size = X MiB"),
    phrase("kv_size", "cells,",
           r"llama_kv_cache\w*+: size = (?P<size>{NUM}) MiB \( ?(?P<cells>\d++) cells, (?P<layers>\d++) layers, "
           r"(?P<seqs>\d++)(?:/\d++)? seqs\), K \((?P<k_type>\w++)\): {NUM} MiB, V \((?P<v_type>\w++)\)",
           "llama_kv_cache: size = X MiB (N cells, L layers, S/S seqs), K (type): ..., V (type): ..."),
    phrase("iswa_full", "creating non-SWA KV cache", r"creating non-SWA KV cache, size = (?P<cells>\d++) cells",
           "llama_kv_cache_iswa: creating non-SWA KV cache, size = N cells"),
    phrase("kv_self", "KV self size", r"KV self size = (?P<size>{NUM}) MiB, (?P<k_type>[^:]++):",
           "KV self size = X MiB, K (f16): ..., V (f16): ..."),
    # 2023 (ggjt): 'llama_init_from_file: kv self size  = 1560.00 MB', llama.cpp's MB then being MiB (it divided by
    # 1024.0 twice: 60 layers x 512 cells x 6656 x 2 x 4 B = 1,635,778,560 B = 1,560.00 MiB).
    phrase("kv_self", "kv self size", r"llama_init_from_file: kv self size = (?P<size>{NUM}) MB\b",
           "llama_init_from_file: kv self size = X MB (2023)"),
    phrase("kv_init", "kv_size =",
           r"kv_size = (?P<cells>\d++), offload = \d++, type_k = '(?P<k_type>\w++)', type_v = '(?P<v_type>\w++)', "
           r"n_layer = (?P<layers>\d++)", "llama_kv_cache_init: kv_size = N, ..., type_k = '...', n_layer = L"),
    phrase("rs_buffer", "RS buffer size =", r"(?<!\S)(?P<device>\S++) RS buffer size = (?P<size>{NUM}) MiB",
           "llama_memory_recurrent: CUDA0 RS buffer size = X MiB"),
    phrase("compute_buffer", "compute buffer size =",
           r"(?<!\S)(?P<device>\S++) compute buffer size = (?P<size>{NUM}) MiB", "CUDA0 compute buffer size = X MiB"),
    phrase("n_ctx", "n_ctx", _CTX + r" n_ctx = (?P<n>\d++)", "llama_context: n_ctx = N"),
    phrase("n_seq_max", "n_seq_max", _CTX + r" n_seq_max = (?P<n>\d++)", "llama_context: n_seq_max = S"),
    phrase("n_ubatch", "n_ubatch", _CTX + r" n_ubatch = (?P<n>\d++)", "llama_context: n_ubatch = U"),
    phrase("n_ctx_seq", "n_ctx_", _CTX + r" n_ctx_(?:per_)?seq = (?P<n>\d++)", "llama_context: n_ctx_seq = W"),
    phrase("n_ctx_seq", "< n_ctx_train", r"n_ctx_(?:per_)?seq \((?P<n>\d++)\) < n_ctx_train",
           "n_ctx_seq (W) < n_ctx_train (T) -- the full capacity of the model will not be utilized"),
    phrase("slots", "n_slots =", r"n_slots = (?P<slots>\d++), n_ctx_slot = (?P<window>\d++)",
           "load_model: initializing, n_slots = S, n_ctx_slot = W"),
    phrase("alloc_failed", "alloc_buffer: allocating",
           r"allocating (?P<size>{NUM}) MiB on device (?P<device>\d++): (?P<why>[^\n]++)",
           "ggml_backend_cuda_buffer_type_alloc_buffer: allocating X MiB on device D: cudaMalloc failed"),
    phrase("failed", "failed to allocate",
           r"(?P<what>failed to allocate (?:buffer for kv cache|compute buffers))", "failed to allocate ..."),
    phrase("failed", "unable to allocate", r"error loading model: (?P<what>unable to allocate \S++ buffer)",
           "error loading model: unable to allocate CUDA0 buffer"),
    # --fit (common_fit_params, llama_params_fit: late-2025 builds) sizes context and offload to a margin.
    phrase("fit_leave", "of free device memory",
           r"will leave (?P<free>{NUM}) >= (?P<margin>{NUM}) MiB of free device memory",
           "llama_params_fit_impl: will leave F >= M MiB of free device memory, no changes needed"),
    phrase("fit_margin", "cannot fulfill margin of", r"cannot fulfill margin of (?P<margin>{NUM}) MiB",
           "llama_params_fit: cannot fulfill margin of M MiB on all devices, need to use X MiB less in total"),
    phrase("fit_ctx", "context size reduced from", r"context size reduced from (?P<asked>\d++) to (?P<n>\d++)",
           "llama_params_fit: context size reduced from A to N -> need X MiB less memory"),
    phrase("retry", "retrying without", r"(?P<what>retrying without [a-z ]++)", "... retrying without ..."),
    phrase("n_vocab", "n_vocab", r"(?:print_info|llm_load_print_meta): n_vocab = (?P<n>\d++)",
           "print_info: n_vocab = V"),
    # llama-cpp-python's server is a uvicorn app; llama-server prints 'main: server is listening on ...'.
    phrase("python_server", "Uvicorn running on", r"Uvicorn running on (?P<url>\S++)",
           "INFO: Uvicorn running on http://HOST:PORT"),
    phrase("llama_server", "server is listening on", r"server is listening on (?P<url>\S++)",
           "main: server is listening on http://HOST:PORT - starting the main loop"),
)

_HOST = re.compile(r"^(?:CPU\w*+|\w+_Host)$")
INFO = "keep llama.cpp's INFO lines (llama-server logs them by default; llama-cpp-python needs verbose=True)"
GAPS = (
    Missing("weights_mib", "'load_tensors: <device> model buffer size = X MiB'", INFO),
    Missing("kv_mib", "'llama_kv_cache: size = X MiB (N cells, ...)' or '<device> KV buffer size = X MiB'", INFO),
    Missing("kv_tokens", "the cells of the llama_kv_cache size line, kv_size =, or n_ctx =", INFO),
    Missing("kv_bytes_per_token", "the KV size line's own pair: X MiB over N cells", "needs that line"),
    Missing("activation_mib", "'<device> compute buffer size = X MiB'", INFO),
    Missing("graph_mib", "nothing: llama.cpp's graphs live in its compute buffers", "read activation_mib"),
    Missing("free_mib", "'using device CUDA0 (...) - X MiB free' at load (builds from early 2025)",
            "run a build that prints it, or read the device's free memory (nvidia-smi) once the server is up"),
    Missing("floor_mib", "the --fit margin ('will leave F >= M MiB of free device memory', 'cannot fulfill "
            "margin of M MiB')", "llama.cpp keeps no floor of its own without --fit (-fit on): hold the headroom you "
            "keep for the driver and other processes back as a personal reserve"),
    Missing("window_tokens", "n_ctx_seq = (n_ctx_per_seq =), or llama-server's n_ctx_slot =",
            INFO + "; the window per sequence is -c / --ctx-size over -np / --parallel"),
    Missing("full_length_sequences", "KV cells / window", "needs the KV tokens and the window"),
)


def _device(name: str) -> str:
    return "CPU" if _HOST.match(name) else name


def rank_of(text: str) -> str | None:
    return None  # llama.cpp names devices inside its lines, read per phrase


def _per_device(hits: list[Hit], key: str) -> dict[str, list[Figure]]:
    found: dict[str, list[Figure]] = {}
    for hit in hits:
        if hit.key == key:
            found.setdefault(_device(hit.raw("device")), []).append(size(hit, "size", "MiB"))
    return found


def _sum(figures: dict[str, list[Figure]], what: str) -> Figure | None:
    every = [f for fs in figures.values() for f in fs]
    return total(every, what) if every else None


def _one(hits: list[Hit], key: str) -> Hit | None:
    return next((h for h in hits if h.key == key), None)


def _kv(hits: list[Hit]) -> tuple[Figure | None, Figure | None, Figure | None, str]:
    """KV memory, KV tokens, bytes per token, and a note; from the engine's own size lines.

    With a sliding-window model the full cache is the one after 'creating non-SWA KV cache'
    (else the one of most cells); the rate counts every cache of as many cells (a full-size
    SWA cache grows with the context too), not a smaller SWA cache, whose size is fixed.
    """
    caches = [h for h in hits if h.key == "kv_size"]
    if not caches:
        self_size = _one(hits, "kv_self")
        cells = _one(hits, "kv_init") or _one(hits, "n_ctx")
        tokens = count(cells, "cells" if cells.key == "kv_init" else "n") if cells else None
        return (size(self_size, "size", "MiB") if self_size else None), tokens, None, ""
    memory = total([size(h, "size", "MiB") for h in caches], "KV caches")
    full_marker = _one(hits, "iswa_full")
    after = [h for h in caches if full_marker is None or h.line.number > full_marker.line.number]
    full = after[0] if full_marker is not None and after else max(caches, key=lambda h: int(h.raw("cells")))
    growing = [h for h in caches if h.raw("cells") == full.raw("cells") and int(h.raw("layers")) > 0]
    tokens = count(full, "cells")
    if not growing:
        return memory, tokens, None, f"line {full.line.number}: the full cache holds no layers"
    rate = bytes_per_token(total([size(h, "size", "MiB") for h in growing], "caches of as many cells"), tokens)
    return memory, tokens, rate, ""


def _window(hits: list[Hit]) -> Figure | None:
    if (hit := _one(hits, "n_ctx_seq")) is not None:
        return count(hit, "n")
    if (hit := _one(hits, "slots")) is not None:
        return count(hit, "window")
    n_ctx, seqs = _one(hits, "n_ctx"), _one(hits, "n_seq_max")
    if n_ctx is not None and seqs is not None and seqs.number("n") == 1:
        return count(n_ctx, "n")  # one sequence: its window is the whole context
    return None


def _fit_margin(hits: list[Hit]) -> Figure | None:
    """The free memory --fit keeps on each device (its --fit-target, with an mmproj's memory added)."""
    hit = _one(hits, "fit_leave") or _one(hits, "fit_margin")
    return size(hit, "margin", "MiB") if hit is not None else None


def _refusals(hits: list[Hit]) -> tuple[Refusal, ...]:
    refusals: list[Refusal] = []
    failures = [h for h in hits if h.key in ("alloc_failed", "failed")]
    for i, hit in enumerate(failures):
        if hit.key == "failed" and i > 0 and failures[i - 1].key == "alloc_failed":
            continue  # the alloc line before it already names this failure
        then = next((f for f in failures[i + 1:] if f.key == "failed"), None) if hit.key == "alloc_failed" else hit
        what = then.raw("what") if then else "failed to allocate a buffer"
        retried = any(h.key == "retry" and h.line.number > hit.line.number for h in hits)
        on = f" ({hit.raw('size')} MiB on device {hit.raw('device')})" if hit.key == "alloc_failed" else ""
        refusals.append(Refusal("allocation_failed", hit.line, (
            f"llama.cpp {what}{on}"
            + ("; it retried without pipeline parallelism and went on" if retried else
               ": the boot failed. Lower -c / --ctx-size or -np / --parallel, quantize the cache (-ctk/-ctv q8_0), "
               "offload fewer layers (-ngl), or spread the model over more devices")), final=not retried))
    return tuple(refusals)


def _build(hits: list[Hit]) -> Built:
    memory, tokens, rate, note = _kv(hits)
    window = _window(hits)
    weights, kv_buffers = _per_device(hits, "model_buffer"), _per_device(hits, "kv_buffer")
    compute = _per_device(hits, "compute_buffer")
    recurrent = _per_device(hits, "rs_buffer")  # a recurrent model's state: on the device, beside the KV cache
    free_at_load = {_device(h.raw("device")): size(h, "free", "MiB") for h in hits if h.key == "device_free"}
    gaps = GAPS if not note else tuple(
        replace(g, remedy=f"{note}; read the SWA cache's size line") if g.figure == "kv_bytes_per_token" else g
        for g in GAPS)
    floor = _fit_margin(hits)
    whole = RankView("all", _sum(weights, "model buffers"), memory, tokens, rate,
                     _sum(compute, "compute buffers"), None, None, window, floor_mib=floor)
    views = [derive(whole, gaps, rate_from_pair=not note)]
    one_cache = sum(1 for h in hits if h.key == "kv_size") <= 1  # else a device's buffers mix full and SWA caches
    used = {*weights, *kv_buffers, *compute, *recurrent}
    for device in sorted((used | set(free_at_load)) - {"CPU"}, key=natural) if len(used) > 1 else []:
        buffers = [f for kind in (weights, kv_buffers, recurrent, compute) for f in kind.get(device, [])]
        free = None
        if device in free_at_load and buffers:
            free = difference(free_at_load[device], total(buffers, f"{device} buffers"), "free at load - buffers")
        view = RankView(device, _sum({device: weights.get(device, [])}, "model buffers"),
                        _sum({device: kv_buffers.get(device, [])}, "KV buffers"), tokens, None,
                        _sum({device: compute.get(device, [])}, "compute buffers"), None, free, window,
                        floor_mib=floor)
        views.append(derive(view, gaps, rate_from_pair=one_cache))
    settings: dict[str, Figure] = {}
    for key, name, field_ in (("n_ctx", "n_ctx", "n"), ("n_seq_max", "n_seq_max", "n"), ("slots", "slots", "slots"),
                              ("fit_ctx", "fit_n_ctx", "n"), ("n_vocab", "n_vocab", "n"),
                              ("n_ubatch", "n_ubatch", "n")):
        if (hit := _one(hits, key)) is not None:
            unit = ("tokens" if name.endswith(("n_ctx", "ubatch")) else "entries" if name == "n_vocab" else
                    "sequences")
            settings[name] = count(hit, field_, unit)
    return Built(tuple(views), _refusals(hits), settings)


ONCE = frozenset({"n_ctx", "n_seq_max", "n_ubatch", "kv_self", "kv_init", "slots", "fit_leave", "fit_margin", "n_vocab",
                  "python_server", "llama_server"})
MARKER_WORDS = ("meta", "device", "build:")
"""A word of each of MARKER's three lines (its pattern's blanks are runs of any blank, so no word spans one)."""
FINISHED = frozenset({"compute_buffer", "python_server", "llama_server"})
"""A boot's start-up ends at its compute buffers (the last buffers it sizes) or its server's start."""
DIALECT = LedgerDialect("llama.cpp", PHRASES, MARKER, ONCE, rank_of, _build, MARKER_WORDS, FINISHED,
                        frozenset({"kv_buffer", "kv_size", "iswa_full", "kv_self", "kv_init"}))


def read_llamacpp(text: str, *, source: str, boot: int = -1) -> Boot:
    """Read one llama.cpp boot (the newest by default) into its typed view."""
    return read(DIALECT, text, source=source, boot=boot)

