"""The simulator's tokenizer, pure and deterministic, with the seed's chars/token ratios.

Text counts at CHARS_PER_TOKEN_CORPUS (2.7617) characters a token, except runs of the
"quick brown fox" pangram (the filler probes pad with), which count at CHARS_PER_TOKEN_FOX
(2.5714); the sum is rounded half up. So a 200,000-token window holds 514,280 characters of
filler or 552,340 of ordinary text (the seed rounds these to 514,286 and 552,286).
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

from radiance_mcp.constants import CHARS_PER_TOKEN_CORPUS, CHARS_PER_TOKEN_FOX

FOX_SENTENCE = "The quick brown fox jumps over the lazy dog. "
"""The filler's unit; any run of it (any case, any spacing) counts at the fox ratio."""
_FOX_RUN = re.compile(r"(?:the\s+quick\s+brown\s+fox\s+jumps\s+over\s+the\s+lazy\s+dog\.?\s*)+", re.IGNORECASE)
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


def fox_filler(tokens: int) -> str:
    """Filler of exactly ``tokens`` tokens: repeats of FOX_SENTENCE, cut to length."""
    if tokens <= 0:
        return ""
    chars = int(Decimal(tokens) * _FOX)
    text = (FOX_SENTENCE * (chars // len(FOX_SENTENCE) + 2))[:chars]
    while count_tokens(text) < tokens:
        chars += 1
        text = (FOX_SENTENCE * (chars // len(FOX_SENTENCE) + 2))[:chars]
    while count_tokens(text) > tokens:
        text = text[:-1]
    return text


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
