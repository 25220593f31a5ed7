"""Live probes of a serving endpoint over httpx: free token counts, the boundary probe, decode rates.

Modules: ``dialects`` (each engine's refusal wording and edge rules, pure), ``prompts`` (filler,
markers, nonces, pure), ``payloads`` (request bodies and null-safe answer readers, pure),
``verdicts`` (judgements, pure), ``client`` (the only network code), ``engine`` (counting
without prefill) and one module per probe. Their inputs and outputs live in
radiance_mcp/models/probes.py, their tool declarations in radiance_mcp/tools/probes.py.

Imports point one way: the pure parts (dialects, prompts, payloads, verdicts) import only the
core and each other; client is the I/O edge; the probe modules use both and the models, and are
imported by the tools, never the other way. The simulator may import dialects and payloads (the
engines' wording, one home) and nothing else here.
"""

from importlib import import_module
from typing import Any

__all__ = ["boundary_probe", "decode_probe", "token_count_probe"]
_HOMES = {"boundary_probe": "boundary", "decode_probe": "decode", "token_count_probe": "token_count"}


def __getattr__(name: str) -> Any:
    # Loaded on first use, so the MCP server starts without httpx and the probe machinery.
    if name in _HOMES:
        return getattr(import_module(f"radiance_mcp.probes.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'radiance_mcp.probes' has no attribute {name!r}")
