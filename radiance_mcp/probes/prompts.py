"""Probe prompts: filler, markers and nonces, built fast and sized in whole filler units (pure).

Every probe prompt is ``head + FOX_UNIT * units + tail``. The filler repeats one sentence, so
a tokenizer cuts every repeat in the middle of the body the same way: adding k units adds
exactly k * (tokens per unit) tokens. The probes use that to count a prompt below the window
without prefill: they send the same prompt with enough extra units to go over the window and
subtract what the units add (see ``engine.ExtensionCounter``).

The head carries what must be at the head: a random nonce (a disk prefix cache survives
restarts, so a "cold" prompt without one can be served warm and look like a miracle) and,
for the boundary probe, the request's unique marker.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

from radiance_mcp.core.constants import BOUNDARY_MARKER_FORMAT, BOUNDARY_MARKER_TAG_BYTES, CHARS_PER_TOKEN_FOX

FOX_UNIT = "The quick brown fox jumps over the lazy dog. "
"""The filler sentence (radiance tokenizes it at CHARS_PER_TOKEN_FOX = 2.5714 chars per token)."""

SEAM = "\n"
"""Between a measured text and the filler after it."""

MAX_FILLER_CHARS_PER_TOKEN = 6.0
"""No tokenizer cuts the filler coarser than this (radiance: 2.5714, Gemma: 4.5): a filler of
N / this many tokens by character count is certainly more than N tokens."""

MAX_TEXT_CHARS_PER_TOKEN = 16.0
"""A text of any kind (runs of spaces included) is certainly more than chars / 16 tokens."""

SEAM_UNCERTAINTY_TOKENS = 2
"""Tokens that may merge across the seam between a text and the filler after it."""


def nonce() -> str:
    """16 random hex digits for the head of a cold prompt."""
    return secrets.token_hex(8)


def marker(index: int) -> str:
    """A unique marker for boundary request ``index`` (0-based): PROBE-01-7F3A2C."""
    return BOUNDARY_MARKER_FORMAT.format(number=index + 1, tag=secrets.token_hex(BOUNDARY_MARKER_TAG_BYTES).upper())


def units_for_tokens(tokens: int, chars_per_token: float = CHARS_PER_TOKEN_FOX) -> int:
    """Filler units expected to make ``tokens`` tokens at a calibrated chars-per-token ratio."""
    return max(1, math.ceil(tokens * chars_per_token / len(FOX_UNIT)))


def units_certainly_above(tokens: int) -> int:
    """Filler units certain to make more than ``tokens`` tokens on any tokenizer."""
    return math.ceil((tokens + 1) * MAX_FILLER_CHARS_PER_TOKEN / len(FOX_UNIT)) + 1


def text_certainly_above(text_chars: int, tokens: int) -> bool:
    """True when a text of this many characters is certainly more than ``tokens`` tokens."""
    return text_chars / MAX_TEXT_CHARS_PER_TOKEN > tokens


@dataclass(frozen=True)
class Prompt:
    """head + FOX_UNIT * units + tail; the tokens of ``units`` more units are known exactly once
    one unit's count is."""

    head: str
    units: int
    tail: str = ""

    def text(self, extra_units: int = 0) -> str:
        return "".join((self.head, FOX_UNIT * (self.units + extra_units), self.tail))

    def chars(self, extra_units: int = 0) -> int:
        return len(self.head) + len(FOX_UNIT) * (self.units + extra_units) + len(self.tail)

    def resized(self, units: int) -> Prompt:
        return Prompt(self.head, max(1, units), self.tail)


def filler(units: int) -> Prompt:
    """The filler alone, after the seam (so it starts as it does after a measured text)."""
    return Prompt(SEAM, units)


def with_filler(text: str, units: int) -> Prompt:
    """A text at the head, the seam, then the filler."""
    return Prompt(text + SEAM, units)


def boundary_prompt(index: int, units: int) -> tuple[Prompt, str]:
    """The boundary probe's prompt ``index``: marker and nonce on the first line, filler, the question."""
    mark = marker(index)
    head = f"MARKER {mark} NONCE {nonce()}\n"
    tail = "\nQuestion: what is the MARKER on the first line? Answer with the marker only."
    return Prompt(head, units, tail), mark


def decode_prompt(units: int) -> Prompt:
    """The decode probe's prompt: a nonce at the head, filler, and a request for a long answer."""
    head = f"NONCE {nonce()}\n"
    tail = "\nContinue the text above: write the same sentence again and again, without stopping."
    return Prompt(head, units, tail)
