"""Live probes of a serving endpoint over httpx: free token counts, the boundary probe, decode rates.

Modules: ``dialects`` (each engine's refusal wording and edge rules, pure), ``prompts`` (filler,
markers, nonces, pure), ``payloads`` (request bodies and null-safe answer readers, pure),
``verdicts`` (judgements, pure), ``client`` (the only network code), ``engine`` (counting
without prefill), one module per tool, ``models`` (inputs and outputs) and ``tools`` (the MCP
registrations).
"""

from radiance_mcp.probes.boundary import boundary_probe
from radiance_mcp.probes.decode import decode_probe
from radiance_mcp.probes.token_count import token_count_probe

__all__ = ["boundary_probe", "decode_probe", "token_count_probe"]
