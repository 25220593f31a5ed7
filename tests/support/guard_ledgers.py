"""Ledgers in styles the shipped example does not show, for the guard-rail tests (issue 9).

Written by hand, not by ledger.render(): journald and `podman logs -t` prefixes, tabs and
runs of spaces, two cards where card 1 binds, a boot refused out of memory after a wider
step, a log whose newest boot refused. The figures are the procedures' own: the 24,000 +
5,120 = 29,120 MiB pair settling at 2.01 GiB free against a 209.19 MiB floor (ceiling
29,120 + (2,058 - 209) = 30,969 MiB/card), and the refused step's 271.25 MiB KV cache
against 8 x 32,768 tokens.
"""

from __future__ import annotations

JOURNAL = "Nov 30 04:12:{s:02d} gpubox radiance[4121]: "
PODMAN = "2026-11-30T04:12:{s:02d}.512345678+00:00 "


def prefixed(prefix: str, lines: list[str]) -> str:
    return "".join(prefix.format(s=n % 60) + line + "\n" for n, line in enumerate(lines))


# Two cards, journald prefixes, tabs: card 0 has the example's figures (ceiling 30,969),
# card 1 settles at 1,800.00 MiB: 29,120 + (1,800 - 209.19) = 30,710.81 -> 30,710, so card 1 binds.
TP2_LINES = [
    "I radiance boot: twin-box",
    "I \t--max-model-len\t200000",
    "I \t--max-num-seqs\t2",
    "I \t--tp\t2",
    "I \t--kv-cache-dtype\tfp8",
    "I \t--host-pool-mib\t7580",
    "I \t--vram-weights-mib\t24000",
    "I \t--vram-kv-mib\t5120",
    "I \t--gpu-headroom-mib\t96",
    "I activation arena  504.00 MiB   (--max-num-batched-tokens 1024)",
    "I claimable  30.87 GiB",
    "I VRAM budget, card 0",
    "I\tcard total\t31.86 GiB",
    "I\tvram_weights\t23.44 GiB\tstated by --vram-weights-mib",
    "I\tvram_kv\t5.00 GiB\tstated by --vram-kv-mib",
    "I\tunclaimed\t477.30 MiB\tthe headroom, the unusable above, rounding",
    "I VRAM budget, card 1",
    "I\tcard total\t31.86 GiB",
    "I\tvram_weights\t23.44 GiB\tstated by --vram-weights-mib",
    "I\tvram_kv\t5.00 GiB\tstated by --vram-kv-mib",
    "I\tunclaimed\t520.00 MiB\tthe headroom, the unusable above, rounding",
    "I ledger mover: 1157 slots can be lent out of the KV cache (1.56 GiB)",
    "I expert prefetch 1.56 GiB, lender: the KV cache",
    "W card 0 settled at 2.01 GiB free   against 209.19 MiB (the 96.00 MiB --gpu-headroom-mib and "
    "113.19 MiB kept for the static region)",
    "W card 1 settled at 1,800.00 MiB free against 209.19 MiB (the 96.00 MiB --gpu-headroom-mib and "
    "113.19 MiB kept for the static region)",
    "I serving on 10.0.0.7:8000",
]
TP2 = prefixed(JOURNAL, TP2_LINES)
TP2_LINE = {text: n for n, text in enumerate(TP2_LINES, 1)}
"""Line numbers by text: 16 card 0's unclaimed, 21 card 1's, 24 and 25 the settled lines."""

# A boot that settled, podman -t prefixes: the example's figures (ceiling 30,969).
SETTLED_LINES = [
    "I radiance boot: qwen38-bf16",
    "I   --max-model-len    200000",
    "I   --max-num-seqs    2",
    "I   --max-num-batched-tokens    1024",
    "I   --kv-cache-dtype    fp8",
    "I   --host-pool-mib    7580",
    "I   --vram-weights-mib    24000",
    "I   --vram-kv-mib    5120",
    "I   --gpu-headroom-mib    96",
    "I activation arena 504.00 MiB (--max-num-batched-tokens 1024)",
    "I claimable 30.87 GiB",
    "I   card total   31.86 GiB",
    "I   vram_weights   23.44 GiB   stated by --vram-weights-mib",
    "I   vram_kv   5.00 GiB   stated by --vram-kv-mib",
    "I   unclaimed   477.30 MiB   the headroom, the unusable above, rounding",
    "I kv cache 5.00 GiB (fp8, 7488 B/token/rank): 100% backing of the 2 x 200000 worst case: 3.0 full-length "
    "sessions",
    "W card 0 settled at 2.01 GiB free against 209.19 MiB (the 96.00 MiB --gpu-headroom-mib and 113.19 MiB "
    "kept for the static region)",
    "I serving on 0.0.0.0:8000",
]

# The same rig after a wider step (65,536): refused out of memory, podman -t prefixes.
REFUSED_LINES = [
    "I radiance boot: qwen38-bf16",
    "I   --max-model-len    32768",
    "I   --max-num-seqs    8",
    "I   --max-num-batched-tokens    65536",
    "I   --kv-cache-dtype    bf16",
    "I   --host-pool-mib    7580",
    "I   --vram-weights-mib    16462",
    "I   --vram-kv-mib    5120",
    "I   --gpu-headroom-mib    96",
    "I activation arena 10.65 GiB (--max-num-batched-tokens 65536)",
    "I claimable 16.85 GiB",
    "I   card total   31.86 GiB",
    "I   vram_weights   16.08 GiB   stated by --vram-weights-mib",
    "I   vram_kv   5.00 GiB   stated by --vram-kv-mib",
    "I   unclaimed   477.30 MiB   the headroom, the unusable above, rounding",
    "I expert prefetch 0 B, no lender",
    "E kv cache 271.25 MiB (bf16, 14144 B/token/rank): 0% backing of the 8 x 32768 worst case: 0.0 "
    "full-length sessions",
    "E vram_budget.cpp:117: lower --max-num-batched-tokens (the arena 10.65 GiB leaves 271.25 MiB for the KV cache)",
    "E startup stopped: out of memory",
]
REFUSED = prefixed(PODMAN, REFUSED_LINES)
REFUSAL_LINE_NUMBERS = (17, 18, 19)
"""kv cache, fix text, startup stopped."""

# A log of two boots, the newest refused: boot 1 lines 1-18, boot 2 lines 19-37.
TWO_BOOTS = prefixed(PODMAN, SETTLED_LINES + REFUSED_LINES)
TWO_BOOTS_REFUSAL_LINES = tuple(n + len(SETTLED_LINES) for n in REFUSAL_LINE_NUMBERS)  # 35, 36, 37
