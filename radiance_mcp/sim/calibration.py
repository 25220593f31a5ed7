"""The simulator's calibration: seed figures that radiance_mcp.constants does not hold, and the
simulator's own assumptions, each named as one or the other.

The seed's figures here come from PHRASEBOOK sections 1, 2, 4, 6 and 7; they live in this one
module until constants.py adopts them. Everything marked ``assumption`` is the simulator's
choice where the seed is silent: it is documented, not measured.
"""

from __future__ import annotations

from decimal import Decimal

from radiance_mcp.constants import AT_CEILING_WORST_FREE_MIB

GIB_MIB = Decimal(1024)

# --- The reference boot (PHRASEBOOK sections 1, 2 and 8: dankserver, the 29,120 MiB pair) ---
SEED_CARD_TOTAL_MIB = Decimal("31.86") * GIB_MIB
"""`card total 31.86 GiB`."""
SEED_STATIC_REGION_MIB = Decimal("113.19")
"""`113.19 MiB kept for the static region`."""
SEED_HEADROOM_MIB = 96
"""`the 96.00 MiB --gpu-headroom-mib`."""
SEED_UNCLAIMED_MIB = Decimal("477.30")
"""`unclaimed 477.30 MiB the headroom, the unusable above, rounding`."""
SEED_SETTLED_FREE_MIB = Decimal("2.01") * GIB_MIB
"""`card 0 settled at 2.01 GiB free` with the 29,120 MiB pair (2,058.24 MiB)."""
SEED_WEIGHTS_MIB = 24_000
SEED_KV_MIB = 5_120
"""The worked example's pair, 24,000 + 5,120 = 29,120 MiB (constants.WORKED_PAIR_MIB)."""
SEED_HOST_POOL_MIB = 7_580
SEED_SEQS = 2
SEED_MAX_MODEL_LEN = 200_000
SEED_SPEC = 3
SEED_MNBT = 1_024

# --- The step-shape law (PHRASEBOOK section 6) ---
CLAIMABLE_POINTS_MIB: tuple[tuple[int, Decimal], ...] = (
    (1_024, Decimal("30.87") * GIB_MIB),
    (65_536, Decimal("16.85") * GIB_MIB),
)
"""Measured on the 31.86 GiB card: `claimable 30.87 GiB` at MNBT 1,024, `16.85 GiB` at 65,536."""
SEED_REFUSED_KV_MIB = Decimal("271.25")
SEED_REFUSED_SEQS = 8
SEED_REFUSED_MAX_MODEL_LEN = 32_768
"""`kv cache 271.25 MiB ... 0% backing of the 8 x 32768 worst case: 0.0 full-length sessions`."""

# --- Slab and host pool (PHRASEBOOK section 4) ---
SEED_SLAB_SLOTS = (16_235, 17_548)
SEED_POOL_SLOTS = (8_893, 7_580)
"""The pool hands back the slots the slab gains: 16,235 + 8,893 = 17,548 + 7,580 = 25,128."""

# --- The endpoint (PHRASEBOOK sections 4 and 7) ---
COLD_PREFILL_TOKENS = 200_000
COLD_PREFILL_S = 22.0
"""`about 22 s for ~200k tokens`: the cold prefill rate is their ratio."""
WARM_PREFILL_TOKENS_PER_S = 60_000.0
"""`a warm 197k prefill ... looks like 60,000 t/s`: cached tokens are read at this rate."""
DECODE_SOLO_TOKENS_PER_S: dict[str, float] = {"fp8": 124.1, "bf16": 94.1}
"""`fp8 ... decoded 124.1 t/s cold, bf16 ... 94.1 t/s`."""
CONCURRENT_STREAMS = 3
CONCURRENT_TOKENS_PER_S = 6.0
"""`Three concurrent streams about 6 t/s each`."""
PREFIX_CACHE_MIB = 64 * 1024
"""`A disk prefix cache (64 GiB)`."""

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
