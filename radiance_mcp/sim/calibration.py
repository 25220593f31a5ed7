"""The simulator's own assumptions, where the seed is silent: documented, not measured.

The seed's measured figures the simulator reproduces live in radiance_mcp.core.constants.
"""

from __future__ import annotations

from decimal import Decimal

from radiance_mcp.core.constants import AT_CEILING_WORST_FREE_MIB, SEED_HEADROOM_MIB, SEED_STATIC_REGION_MIB

# --- Assumptions (the seed is silent; the simulator chooses) ---
LAZY_DRIVER_MIB = AT_CEILING_WORST_FREE_MIB - (SEED_HEADROOM_MIB + SEED_STATIC_REGION_MIB)
"""assumption: the driver maps its last 120.81 MiB lazily, only where the card has twice that
above the engine floor. It is why a pair at the ceiling settles about 330 MiB free at worst
(AT_CEILING_WORST_FREE_MIB) rather than at the floor."""
KV_BLOCK_MIB = Decimal("0.25")
"""assumption: the KV cache is granted in 256 KiB blocks (271.25 MiB is 1,085 of them)."""
THINKING_TOKENS = 200
"""assumption: with thinking on, the first 200 generated tokens are reasoning, not content."""
ANSWER_HEAD_CHARS = 256
"""assumption: the model repeats the first line of its prompt, up to this many characters."""
PREFIX_BLOCK_CHARS = 1_024
"""assumption: the prefix cache keys blocks of this many characters of prompt text."""
