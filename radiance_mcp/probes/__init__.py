"""Live probes of a serving endpoint over httpx: free token counts, the boundary probe, decode rates.

Modules: ``prompts`` (filler, markers, nonces, pure), ``client`` (the only network code),
``engine`` (counting without prefill) and one module per probe. The engines' refusal wording
and the request bodies live in core.wording (the simulator writes with them), the judgements of
an answer in core.rules.probe_verdicts, what a boot lets a probe ask in core.rules.probe_shape;
the probes' inputs and outputs in radiance_mcp/models/probes.py, their tool declarations in
radiance_mcp/tools/probes.py. Imported by the tools, never the other way.
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
