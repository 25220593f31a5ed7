"""The simulator's tokenizer, pure and deterministic, with the seed's chars/token ratios.

Text counts at CHARS_PER_TOKEN_CORPUS (2.7617) characters a token, except runs of the
"quick brown fox" pangram (the filler probes pad with), which count at CHARS_PER_TOKEN_FOX
(2.5714); the sum is rounded half up. So a 200,000-token window holds 514,280 characters of
filler or 552,340 of ordinary text (the seed quotes "about 514,286 to 552,286").
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

from radiance_mcp.core.constants import CHARS_PER_TOKEN_CORPUS, CHARS_PER_TOKEN_FOX

FOX_SENTENCE = "The quick brown fox jumps over the lazy dog. "
"""The filler's unit. A run of whole sentences (any case, any spacing), and any start of one more
sentence right after it, counts at the fox ratio. So adding a character adds at most one token,
except the character that completes a run's first sentence (its characters then all count at the
fox ratio, about 1.2 tokens more); fox_filler pads around that step, so it hits any count."""


def _prefix_pattern(text: str) -> str:
    """A regex matching any prefix of text (possibly empty): T(?:h(?:e...)?)?."""
    pattern = ""
    for char in reversed(text):
        pattern = f"(?:{re.escape(char)}{pattern})?"
    return pattern


_FOX_RUN = re.compile(
    r"(?:the\s+quick\s+brown\s+fox\s+jumps\s+over\s+the\s+lazy\s+dog\.?\s*)+" + _prefix_pattern(FOX_SENTENCE.strip()),
    re.IGNORECASE,
)
_CORPUS = Decimal(str(CHARS_PER_TOKEN_CORPUS))
_FOX = Decimal(str(CHARS_PER_TOKEN_FOX))


def _token_value(text: str) -> Decimal:
    fox_chars = sum(len(m.group(0)) for m in _FOX_RUN.finditer(text))
    return Decimal(fox_chars) / _FOX + Decimal(len(text) - fox_chars) / _CORPUS


def count_tokens(text: str) -> int:
    """The number of tokens the simulated engine counts in text."""
    if not text:
        return 0
    return int(_token_value(text).to_integral_value(rounding=ROUND_HALF_UP))


def fox_filler(tokens: int, head: str = "") -> str:
    """``head`` followed by fox filler, exactly ``tokens`` tokens in all (head alone if it has as many).

    Counts are not additive (each text's sum is rounded once), so the filler is sized on the whole.
    """
    head_tokens = count_tokens(head)
    if head_tokens >= tokens:
        return head

    def text(chars: int) -> str:
        return head + (FOX_SENTENCE * (chars // len(FOX_SENTENCE) + 1))[:chars]

    low, high = 0, int((tokens + 1) * _FOX) + 1  # the fewest filler characters reaching `tokens`
    # Filler adds about one token per _FOX characters: search near there when the guess brackets the
    # answer (two counts check it), not over the whole range (18 counts of up to 640 KB for 200,000 tokens).
    guess = int((tokens - head_tokens) * _FOX)
    near_low, near_high = max(0, guess - 16), min(high, guess + 16)
    if count_tokens(text(near_low)) < tokens <= count_tokens(text(near_high)):
        low, high = near_low + 1, near_high
    while low < high:
        middle = (low + high) // 2
        if count_tokens(text(middle)) >= tokens:
            high = middle
        else:
            low = middle + 1
    found = text(low)
    if count_tokens(found) > tokens:
        # Completing the first sentence turns its characters to the fox ratio at once (1.2 tokens):
        # stop short of it and pad with characters that are not filler.
        found = text(low - 1)
        while count_tokens(found) < tokens:
            found += "~"
    return found


def keep_tail(text: str, tokens: int) -> str:
    """The longest suffix of text with at most ``tokens`` tokens (what a head-truncating engine keeps)."""
    if tokens <= 0:
        return ""
    low, high = 0, len(text)  # the answer's start lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        if count_tokens(text[middle:]) <= tokens:
            high = middle
        else:
            low = middle + 1
    return text[low:]
