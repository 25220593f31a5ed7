"""What each engine's knobs are, by engine: one table each, read by the rules and the tools alike.

Pure facts, no import of any dialect (a radiance ledger loads no other engine's code).
"""

from dataclasses import dataclass
from typing import Literal

from radiance_mcp.core.constants import AT_CEILING_WORST_FREE_MIB, LedgerEngine

AT_CEILING: dict[LedgerEngine, str] = {
    "radiance": f"a pair at the ceiling settles about {AT_CEILING_WORST_FREE_MIB} MiB free at worst",
}
"""What a boot whose pair is at its ceiling settles at, where the engine's own measurements say (the seed's)."""

KV_FLAGS: dict[LedgerEngine, str] = {
    "radiance": "--vram-kv-mib (with --vram-weights-mib, the pair)",
    "vllm": "--gpu-memory-utilization (a share of the card), or --kv-cache-memory-bytes (bytes)",
    "sglang": "--mem-fraction-static (weights + KV pool as a share of the card), or --max-total-tokens",
    "llama.cpp": "-c / --ctx-size (cells shared by the slots) and -np / --parallel, with -ctk / -ctv (bytes per cell)",
}
"""The flag that moves each engine's KV memory (radiance's too: the dialects' facts, one table)."""
FLOORS: dict[LedgerEngine, str] = {
    "radiance": "--gpu-headroom-mib plus the static region, which the settled line prints",
    "vllm": "the (1 - --gpu-memory-utilization) share of the card vLLM leaves unclaimed",
    "sglang": "the (1 - --mem-fraction-static) share SGLang keeps for activations and CUDA graphs",
    "llama.cpp": "the margin --fit keeps free (none without --fit: llama.cpp allocates what it is asked for)",
}
RATE_FROM: dict[LedgerEngine, str] = {"radiance": "model", "vllm": "ledger", "sglang": "ledger", "llama.cpp": "ledger"}
"""Where each engine's KV rate comes from: the model's constant per --kv-cache-dtype (radiance), or the engine's own
KV pair in its log (KV memory over KV tokens): which contract rule prices its pool (core.rules.contract)."""
SEATS = {"sglang": "max_running_requests", "llama.cpp": "slots"}
"""The setting each engine prints for the sequences it serves at once (vLLM prints none at INFO)."""

ShapeRole = Literal["window", "seats", "kv_memory", "kv_dtype", "step", "host_pool", "headroom"]
"""What a flag an env file owns sets: the window, the sequences served at once, the KV memory, the KV dtype,
the step (batched or prefill tokens), radiance's host pool and GPU headroom."""


@dataclass(frozen=True)
class Flag:
    role: ShapeRole
    spellings: tuple[str, ...]
    """Every spelling the program takes, the long one first: it names the flag in findings."""


@dataclass(frozen=True)
class Launcher:
    """A program that starts an engine, and its flags that set the shape an env file owns."""

    name: str
    flags: tuple[Flag, ...]
    programs: tuple[str, ...] = ()
    """Executables, by the last part of their path."""
    modules: tuple[str, ...] = ()
    """What ``python -m`` runs."""
    images: tuple[str, ...] = ()
    """Container images whose entry point is the program (a reference starting so, then ':', '@', '-' or its end)."""
    folds_underscores: bool = False
    """The program reads --max_model_len as --max-model-len (each '_' of a '--' word as '-')."""
    takes_equals: bool = True
    """The program reads --flag=value as well as --flag value."""
    config_flags: tuple[str, ...] = ()
    """Flags that load more flags from a file: the shape may be set there, out of a serve script's sight."""


SHAPE_FLAGS: dict[LedgerEngine, tuple[Launcher, ...]] = {
    # radiance: the flags its phrasebook gives the env file (shared/radiance/PHRASEBOOK.md, section 6: seats, step,
    # host pool, headroom). Its window and --kv-cache-dtype are a mode's own: the serve-script check never owned them.
    "radiance": (Launcher(
        "radiance", programs=("radiance",),
        flags=(Flag("seats", ("--max-num-seqs",)), Flag("step", ("--max-num-batched-tokens",)),
               Flag("host_pool", ("--host-pool-mib",)), Flag("headroom", ("--gpu-headroom-mib",))),
    ),),
    # vLLM: vllm/engine/arg_utils.py add_cli_args (--max-model-len, --max-num-seqs, --max-num-batched-tokens;
    # CacheConfig: --gpu-memory-utilization, --kv-cache-memory-bytes, --kv-cache-dtype, --num-gpu-blocks-override).
    # --kv-cache-memory-bytes came with vllm-project/vllm#21489 (under review July 2025, merged; which release
    # first shipped it is not confirmed here); there is no --kv-cache-memory flag (argparse may take that as an
    # abbreviation of --kv-cache-memory-bytes: abbreviations are not read here). FlexibleArgumentParser.parse_args
    # (vllm/utils/argparse_utils.py) turns '_' into '-' in a '--' word's name, with or without '=value', and
    # pulls flags from a YAML file named by --config. Entry points: `vllm serve`, `python -m
    # vllm.entrypoints.openai.api_server`, and the vllm/vllm-openai image, whose arguments go to the server.
    "vllm": (Launcher(
        "vllm", programs=("vllm",), modules=("vllm.entrypoints.openai.api_server",), images=("vllm/vllm-openai",),
        flags=(Flag("window", ("--max-model-len",)), Flag("seats", ("--max-num-seqs",)),
               Flag("kv_memory", ("--gpu-memory-utilization",)), Flag("kv_memory", ("--kv-cache-memory-bytes",)),
               Flag("kv_memory", ("--num-gpu-blocks-override",)), Flag("kv_dtype", ("--kv-cache-dtype",)),
               Flag("step", ("--max-num-batched-tokens",))),
        folds_underscores=True, config_flags=("--config",),
    ),),
    # SGLang: python/sglang/srt/server_args.py ServerArgs, each field's flag derived by
    # arg_groups/arg_utils.py _field_to_cli_name ('_' -> '-', plain argparse: no '_' spelling is read):
    # context_length, max_running_requests, mem_fraction_static, max_total_tokens, kv_cache_dtype,
    # chunked_prefill_size, max_prefill_tokens; --config loads a YAML file (docs.sglang.io, Server Arguments).
    # Entry points: `python -m sglang.launch_server` and `sglang serve` (python/sglang/cli/serve.py).
    "sglang": (Launcher(
        "sglang", programs=("sglang",), modules=("sglang.launch_server",),
        flags=(Flag("window", ("--context-length",)), Flag("seats", ("--max-running-requests",)),
               Flag("kv_memory", ("--mem-fraction-static",)), Flag("kv_memory", ("--max-total-tokens",)),
               Flag("kv_dtype", ("--kv-cache-dtype",)), Flag("step", ("--chunked-prefill-size",)),
               Flag("step", ("--max-prefill-tokens",))),
        config_flags=("--config",),
    ),),
    "llama.cpp": (
        # llama-server: common/arg.cpp (-c/--ctx-size, -np/--parallel, -ctk/--cache-type-k, -ctv/--cache-type-v,
        # -b/--batch-size, -ub/--ubatch-size). common_params_parse_ex looks each argv word up whole, after turning
        # '_' into '-' in a '--' word (so --ctx_size is read), and takes the value from the next word: there is no
        # --flag=value form ("error: invalid argument: --ctx-size=16384", gpustack/gpustack#3741). No flag sizes
        # the KV memory: it follows from the cells (-c) and their type (-ctk/-ctv). The server images
        # ghcr.io/ggml-org/llama.cpp:server* (formerly ghcr.io/ggerganov/...) run llama-server.
        Launcher(
            "llama-server", programs=("llama-server",),
            images=("ghcr.io/ggml-org/llama.cpp:server", "ghcr.io/ggerganov/llama.cpp:server"),
            flags=(Flag("window", ("--ctx-size", "-c")), Flag("seats", ("--parallel", "-np")),
                   Flag("kv_dtype", ("--cache-type-k", "-ctk")), Flag("kv_dtype", ("--cache-type-v", "-ctv")),
                   Flag("step", ("--batch-size", "-b")), Flag("step", ("--ubatch-size", "-ub"))),
            folds_underscores=True, takes_equals=False,
        ),
        # llama-cpp-python's server: llama_cpp/server/__main__.py and cli.py add_args_from_model, one
        # '--<field>' per ModelSettings field (llama_cpp/server/settings.py: n_ctx, n_batch, n_ubatch, type_k,
        # type_v), plain argparse; --config_file loads a JSON file of settings. It serves one sequence at a time:
        # no seats flag, and no KV memory flag (it follows from n_ctx and type_k/type_v).
        Launcher(
            "llama-cpp-python", modules=("llama_cpp.server",),
            flags=(Flag("window", ("--n_ctx",)), Flag("kv_dtype", ("--type_k",)), Flag("kv_dtype", ("--type_v",)),
                   Flag("step", ("--n_batch",)), Flag("step", ("--n_ubatch",))),
            config_flags=("--config_file",),
        ),
    ),
}
"""Each engine's launchers and, for each, every spelling of the flags that set the shape an env file owns: the
serve-script check finds a mode that passes its own value to one (core.audit.serve_script)."""

LOGITS_BYTES_PER_ENTRY = 4
"""llama-cpp-python's server keeps a float32 logit for every vocabulary entry of every context position in host
memory: its ModelSettings.logits_all defaults to True (llama_cpp/server/settings.py) and Llama.__init__ then
allocates scores of shape (n_ctx, n_vocab) float32 (llama_cpp/llama.py; 0.3.x). No line of its log prints it."""

AUDIT_ROWS: dict[str, tuple[tuple[str, str], ...]] = {
    # row key -> where another engine's boot prints it: a RankView figure of its binding rank, or a setting
    "vllm": (("--max-model-len", "window_tokens"), ("arena", "activation_mib"), ("vram_kv", "kv_mib"),
             ("weights_vram", "weights_mib"), ("sessions", "full_length_sequences")),
    "sglang": (("--max-model-len", "window_tokens"), ("--max-num-seqs", "setting:max_running_requests"),
               ("--max-num-batched-tokens", "setting:chunked_prefill_size"), ("arena", "graph_mib"),
               ("vram_kv", "kv_mib"), ("weights_vram", "weights_mib"), ("sessions", "full_length_sequences")),
    "llama.cpp": (("--max-model-len", "window_tokens"), ("--max-num-seqs", "setting:n_seq_max"),
                  ("--max-num-batched-tokens", "setting:n_ubatch"), ("arena", "activation_mib"),
                  ("vram_kv", "kv_mib"), ("weights_vram", "weights_mib"), ("sessions", "full_length_sequences")),
}
"""Each other engine's step shape in the audit's rows (radiance's row keys; the engine's own flags name them:
AUDIT_FLAGS): the window, seats and step it prints, its activation (SGLang: its CUDA graphs) and KV memory,
its weights and the full-length sequences its cache backs."""
AUDIT_FLAGS: dict[str, dict[str, str]] = {
    "vllm": {"--max-model-len": "--max-model-len"},
    "sglang": {"--max-model-len": "--context-length", "--max-num-seqs": "--max-running-requests",
               "--max-num-batched-tokens": "--chunked-prefill-size"},
    "llama.cpp": {"--max-model-len": "n_ctx_seq (-c / -np)", "--max-num-seqs": "-np / --parallel",
                  "--max-num-batched-tokens": "-ub / --ubatch-size"},
}
"""How each engine's own flags name the audit's flag rows."""
