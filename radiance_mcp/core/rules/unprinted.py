"""What an engine costs that its log does not print, known from its documented behaviour (pure): said as a note
with its arithmetic over the figures the log does print, never as a ledger figure.

Today: llama-cpp-python's server's logits in host memory, n_ctx x n_vocab x 4 B (engine_facts.LOGITS_BYTES_PER_ENTRY),
told from llama-server by uvicorn's start-up line.
"""

from __future__ import annotations

from decimal import Decimal

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.constants import MIB
from radiance_mcp.core.engine_facts import LOGITS_BYTES_PER_ENTRY
from radiance_mcp.core.units import fmt_mib


def host_logits(boot: Boot, n_ctx_after: Decimal | None = None) -> str | None:
    """The host memory llama-cpp-python's server holds for logits now, and at n_ctx_after where given; None for
    any other engine or llama.cpp build."""
    server = boot.first("python_server") if boot.engine == "llama.cpp" else None
    if server is None:
        return None
    what = (f"llama-cpp-python's server keeps n_ctx x n_vocab x {LOGITS_BYTES_PER_ENTRY} B of float32 logits in "
            "host memory (logits_all, its default), which no line prints")
    ctx, vocab = boot.settings.get("n_ctx"), boot.settings.get("n_vocab")
    if ctx is None or vocab is None:
        return f"{what}; this log prints no {'n_ctx' if ctx is None else 'n_vocab'} line, so it is not priced"
    per_token = vocab.value * LOGITS_BYTES_PER_ENTRY

    def logits(n: Decimal) -> Decimal:
        return n * per_token / MIB

    text = (f"{what}: {ctx.value:,} x {vocab.value:,} x {LOGITS_BYTES_PER_ENTRY} B = {fmt_mib(logits(ctx.value), 2)} "
            f"MiB (lines {ctx.line.number}, {vocab.line.number})")
    if n_ctx_after is not None and n_ctx_after != ctx.value:
        grows = logits(n_ctx_after) - logits(ctx.value)
        text += (f"; at n_ctx {n_ctx_after:,}: {fmt_mib(logits(n_ctx_after), 2)} MiB ({'+' if grows >= 0 else ''}"
                 f"{fmt_mib(grows, 2)} MiB of host memory beside the KV growth)")
    return text
