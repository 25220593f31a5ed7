"""The seed's figures, one home each.

Every number the two procedures give lives here; code, docstrings and tests read them from
here (a test checks that the tool docstrings quote these same values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Literal

KVDtype = Literal["fp8", "bf16"]
KV_DTYPES: tuple[KVDtype, ...] = ("fp8", "bf16")
LedgerEngine = Literal["radiance", "vllm", "sglang", "llama.cpp"]
"""Which engine printed a boot ledger: radiance (read by radiance_mcp.core.ledger) or one of radiance_mcp.core.engines'
dialects (here, so the fleet config names one without loading them)."""

MIB = 1 << 20
"""Bytes in a MiB; MiB is the unit of record."""


@dataclass(frozen=True)
class ModelConstants:
    """The pool-contract constants of one model (they are measured per model)."""

    name: str
    rate_bytes_per_token: MappingProxyType[str, int]
    """KV bytes per token per rank, by --kv-cache-dtype."""
    per_seq_mib: int
    """Recurrent state per sequence, dtype-independent."""
    fixed_mib: int
    """Prefix checkpoints, dtype-independent."""


DEFAULT_MODEL = ModelConstants(
    name="Qwen3.8-Flash-Next w4",
    rate_bytes_per_token=MappingProxyType({"fp8": 7_488, "bf16": 14_144}),
    per_seq_mib=110,
    fixed_mib=448,
)

# The ledger's engine floor and the worked example (dankserver, 2026-10-13).
WORKED_PAIR_MIB = 29_120
WORKED_CEILING_MIB = 30_969
AT_CEILING_WORST_FREE_MIB = 330
"""A pair at the ceiling settles about this much free at worst."""

# Sampler rows: seqs x (1 + spec) must stay inside this exactness bound.
SAMPLER_ROW_BOUND = 25

# Slab slope: resident expert slots per slab MiB, measured.
SLAB_SLOTS_PER_STEP = 1_300
SLAB_MIB_PER_STEP = 1_792

# Throughput measurements are compared inside this band; two arms inside it are not a plateau,
# and no plateau or threshold is read off fewer arms than this (compare_arms).
NOISE_BAND = 0.03
MIN_ARMS_FOR_THRESHOLD = 3

# Decode probes: fewer generated tokens than this measure first-token noise.
MIN_DECODE_TOKENS = 128
PREFERRED_DECODE_TOKENS = 512

# Boundary probes: request k's answer must hold its marker, the format filled with k and random hex (3 bytes);
# an ASCII character is at most one token, so the marker's characters and a space before it are the fewest
# generated tokens certain to hold it (core.rules.probe_verdicts.min_boundary_tokens).
BOUNDARY_MARKER_FORMAT = "PROBE-{number:02d}-{tag}"
BOUNDARY_MARKER_TAG_BYTES = 3

# Measured chars per token (corpus, fox filler).
CHARS_PER_TOKEN_CORPUS = 2.7617
CHARS_PER_TOKEN_FOX = 2.5714

# The step-shape law, measured: max-num-batched-tokens -> activation arena MiB.
ARENA_POINTS_MIB: tuple[tuple[int, float], ...] = ((1_024, 504.0), (65_536, 10.65 * 1024))


# ---------------------------------------------------------------------------------------
# Measured figures of the procedures that the simulator reproduces (PHRASEBOOK sections 1-8).

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


# ---------------------------------------------------------------------------------------
# Limits on tool arguments. Every schema bound of every tool input comes from here (or names
# its home here); the README's limits table lists them. Each is chosen from the domain, so a
# value outside it is a mistake or an attack, never a real figure: it is refused with the
# argument's name and its range, before anything is read or parsed.

MAX_LEDGER_TEXT_CHARS = 1 << 20
"""log_text and its proven_ / candidate_ variants. A boot's phrase lines are a few KiB, and
pasted text passes through an agent's context, which holds far less; a larger ledger is read
from its file (log, container), from the end, never whole."""
SCRIPT_CAP_BYTES = 1 << 20
"""A serve script or env file: as a file (bytes), or as script_text / env_text (characters)."""
DRY_RUN_OUTPUT_CAP_BYTES = 256 * 1024
"""One dry run's printed argv: a run's output, or proven_argv / candidate_argv (characters)."""
MAX_PROBE_TEXT_CHARS = 4 << 20
"""token_count_probe's text. A corpus sample may fill a whole window: 200,000 tokens are about
514,000 characters of filler and 552,000 of corpus (CHARS_PER_TOKEN_FOX, _CORPUS). One refusal
counts a text exactly only when it is certainly above the window, past 16 characters a token
(probes.prompts.MAX_TEXT_CHARS_PER_TOKEN): 3.2 M characters for a 200,000-token window, so
4 Mi characters keep that one-request count for windows up to 262,144 tokens."""
MAX_PATH_CHARS = 4096
"""A path argument (log, script, env_file): Linux's PATH_MAX."""
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
"""A control character (C0 or DEL): no path may hold one, on a host or here; none may reach a command line, and
a newline in a name written into the gate files would start a line of shell there."""
MAX_NAME_CHARS = 256
"""A name (service, host, container, mode, served model) or a reserve's label: names, not text."""
MAX_RESERVES = 64
"""Reserves in one compute_ceiling call; each cites its own line or is personal."""
MAX_BOOT = 1_000_000
"""`boot` counts boots of one log from either end (0 is no boot); no ledger holds more."""
MAX_LINE_NUMBER = 1 << 40
"""A ledger line number: a 1 TiB log of one-byte lines has no more lines (and a byte offset of one, no larger)."""
MAX_WAIT_S = 600
"""The longest a ledger tool waits for a boot to settle (wait_s): a start-up that takes longer is waited for again."""
MAX_SEQS = 1 << 16
"""--max-num-seqs: sequences one engine holds at once; serving engines cap it in the thousands."""
MAX_WINDOW_TOKENS = 1 << 24
"""--max-model-len and any token count: 16 Mi tokens, above every context window shipped (10 M)."""
MAX_POOL_MIB = 1 << 30
"""A memory size (a KV pool, a reserve): 1 PiB, far above any card's VRAM; a bigger figure is a
unit mistake (bytes passed as MiB)."""
