"""What each engine's knobs are, by engine: one table each, read by the rules and the tools alike.

Pure facts, no import of any dialect (a radiance ledger loads no other engine's code).
"""

from radiance_mcp.core.constants import AT_CEILING_WORST_FREE_MIB, LedgerEngine

AT_CEILING: dict[LedgerEngine, str] = {
    "radiance": f"a pair at the ceiling settles about {AT_CEILING_WORST_FREE_MIB} MiB free at worst",
}
"""What a boot whose pair is at its ceiling settles at, where the engine's own measurements say (the seed's)."""

KV_FLAGS: dict[LedgerEngine, str] = {
    "radiance": "--vram-kv-mib (with --vram-weights-mib, the pair)",
    "vllm": "--gpu-memory-utilization (a share of the card), or --kv-cache-memory (bytes)",
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
