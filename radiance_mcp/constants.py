"""The seed's figures, one home each.

Every number the two procedures give lives here; code, docstrings and tests read them from
here (a test checks that the tool docstrings quote these same values).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

KVDtype = Literal["fp8", "bf16"]
KV_DTYPES: tuple[KVDtype, ...] = ("fp8", "bf16")

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

# Throughput measurements are compared inside this band; two arms inside it are not a plateau.
NOISE_BAND = 0.03
MIN_ARMS_FOR_THRESHOLD = 3

# Decode probes: fewer generated tokens than this measure first-token noise.
MIN_DECODE_TOKENS = 128
PREFERRED_DECODE_TOKENS = 512

# Measured chars per token (corpus, fox filler).
CHARS_PER_TOKEN_CORPUS = 2.7617
CHARS_PER_TOKEN_FOX = 2.5714

# The step-shape law, measured: max-num-batched-tokens -> activation arena MiB.
ARENA_POINTS_MIB: tuple[tuple[int, float], ...] = ((1_024, 504.0), (65_536, 10.65 * 1024))
