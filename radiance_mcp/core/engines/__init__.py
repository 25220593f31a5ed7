"""Boot-ledger dialects of the open engines: vLLM, SGLang and llama.cpp (pure: text in, records out).

`read_engine_boot(text, source=..., engine=None)` reads one start-up (the newest by default)
of an engine's log into a `Boot`: per card or rank the weights, KV memory, KV tokens,
bytes per token (the engine's own pair), activation and graph memory, the free memory the
engine left, the window and the full-length sequences at the window, each with its line;
the figures the engine did not print, named with how to get them; and refused boots with
their lines. `detect(text)` tells which engine printed a log. Each dialect lives in its own
module with its phrase table: vllm.py, sglang.py, llamacpp.py; common.py holds the reader they
share.

This package is part of the pure core: it imports only constants, errors and units (never a
file, network, MCP or CLI module); the tools that read a file or a host hand it the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from radiance_mcp.core.boot import Boot, Line, RankView, StopCheck, never_stop
from radiance_mcp.core.constants import LedgerEngine
from radiance_mcp.core.engines import llamacpp, sglang, vllm
from radiance_mcp.core.engines.common import EngineName, LedgerDialect, grep_words, lines_of, match, read, read_lines
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.ledger import KEYWORDS, holds_radiance_words, match_line

ENGINES: tuple[EngineName, ...] = get_args(EngineName)
DETECT_LINES = 20_000
"""Detection reads the first this many lines: a start-up ledger is at a log's top."""


def _dialects(block_size_tokens: int | None) -> dict[EngineName, LedgerDialect]:
    return {"vllm": vllm.dialect(block_size_tokens), "sglang": sglang.DIALECT, "llama.cpp": llamacpp.DIALECT}


def detect(text: str, *, source: str = "the log") -> EngineName:
    """Which engine printed this log: the one whose phrase table matches the most lines.

    Raises LedgerError when no engine's phrase appears, or when two engines match equally
    (a log holding two engines' output); name the engine then.
    """
    lines, _ = lines_of(text)
    scores = {name: _score(dialect, lines) for name, dialect in _dialects(None).items()}
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    (best, top), (second, runner_up) = ranked[0], ranked[1]
    if top == 0:
        raise LedgerError(
            f"{source}: no start-up line of vLLM, SGLang or llama.cpp (such as 'GPU KV cache size: N tokens', "
            "'KV Cache is allocated. #tokens: N', 'llama_kv_cache: size = X MiB (N cells, ...)'); pass the "
            "engine's own start-up log, or name the engine"
        )
    if top == runner_up:
        raise LedgerError(
            f"{source}: as many lines read as {best} as {second} ({top} each); name the engine "
            f"(one of {', '.join(ENGINES)})"
        )
    return best


def _score(dialect: LedgerDialect, lines: list[Line], checkpoint: StopCheck = never_stop) -> int:
    score = 0
    for line in lines[:DETECT_LINES]:
        checkpoint()
        score += bool(match(dialect.phrases, line, dialect.rank_of))
    return score


def detect_ledger(text: str, *, source: str = "the log", checkpoint: StopCheck = never_stop) -> LedgerEngine:
    """radiance, or the engine whose phrases match more lines than radiance's do.

    A text with no engine's phrase is radiance's (whose reader then names what it lacks); a
    text holding one of radiance's own budget words, which none of the three engines prints,
    is radiance's at once; neither is scanned line by line.
    """
    if holds_radiance_words(text):
        return "radiance"
    candidates = {}
    for name, dialect in _dialects(None).items():
        checkpoint()
        if any(p.keyword and p.keyword in text for p in dialect.phrases[1:]):
            candidates[name] = dialect
    if not candidates:
        return "radiance"
    lines, _ = lines_of(text)
    radiance = 0
    for line in lines[:DETECT_LINES]:
        checkpoint()
        radiance += bool(match_line(line))
    scores = {name: _score(d, lines, checkpoint) for name, d in candidates.items()}
    best = max(scores, key=lambda name: scores[name])
    if scores[best] <= radiance:
        return "radiance"
    tied = [name for name, score in scores.items() if score == scores[best] and name != best]
    if tied:
        raise LedgerError(
            f"{source}: as many lines read as {best} as {tied[0]} ({scores[best]} each); name the service's engine "
            f"in the fleet config (engine = one of radiance, {', '.join(ENGINES)})"
        )
    return best


def read_engine_boot(
    text: str,
    *,
    source: str,
    engine: EngineName | None = None,
    boot: int = -1,
    block_size_tokens: int | None = None,
    checkpoint: StopCheck = never_stop,
) -> Boot:
    """Read one boot (the newest by default) of a vLLM, SGLang or llama.cpp log.

    `engine` None detects it. `block_size_tokens` is vLLM's --block-size, needed only for
    a V0 boot, which prints its KV cache in blocks.
    """
    name = engine if engine is not None else detect(text, source=source)
    if name not in ENGINES:
        raise LedgerError(f"engine={name!r}: expected one of {', '.join(ENGINES)}")
    return read(_dialects(block_size_tokens)[name], text, source=source, boot=boot, checkpoint=checkpoint)


def engine_words(engine: EngineName | None) -> tuple[str, ...]:
    """The words a host greps an engine's log for: that engine's, or (None, engine unnamed) every engine's
    and radiance's keywords, so the lines sent tell the engine as the whole log would."""
    if engine is not None:
        words = grep_words(_dialects(None)[engine])
    else:
        words = tuple(dict.fromkeys([*(w for d in _dialects(None).values() for w in grep_words(d)), *KEYWORDS]))
    # A word holding another adds no line ('n_ctx_' after 'n_ctx').
    return tuple(w for w in words if not any(o != w and o in w for o in words))


def read_engine_lines(
    lines: Sequence[Line], *, source: str, engine: EngineName, boot: int = -1, last_line: int, skipped: int = 0,
    dropped: int = 0, checkpoint: StopCheck = never_stop,
) -> Boot:
    """read_engine_boot on numbered lines: those of a log holding one of engine_words (a host's grep), with
    the log's last line number; dropped > 0: the older ones of them were not sent (common.read_lines)."""
    return read_lines(_dialects(None)[engine], lines, source=source, boot=boot, last_line=last_line,
                      skipped=skipped, dropped=dropped, checkpoint=checkpoint)


__all__ = [
    "ENGINES", "Boot", "EngineName", "LedgerEngine", "RankView", "detect",
    "detect_ledger", "engine_words", "read_engine_boot", "read_engine_lines",
]
