"""bash words: a small tokenizer honouring quotes, ``$(...)``, ``${...}``, comments, heredocs
and line continuations, and the shapes of a name, a constant and a ``${...}`` reference in a word.

Nesting deeper than MAX_NESTING is refused with an InputError (nested_too_deep, which the parser
raises too for functions and case arms nested that deep).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from radiance_mcp.core.errors import InputError

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
"""A shell variable name."""
CONSTANT = re.compile(r"^[^$`]+$")
"""A value with nothing left to expand: a number, a fraction, a dtype ('32768', '0.90', 'q8_0')."""


def braced(start: re.Pattern[str], word: str) -> Iterator[tuple[re.Match[str], str]]:
    """Each match of start in word, with the text up to the next '}' when start opened a brace.

    As finditer with '[^}]*}' after the brace would find them, in one pass: that regex scans
    on from every '${' to the next '}', quadratic in a word like '${a${a${a...' (a script is
    up to 1 MiB). A brace left open matches nothing, as the regex did not.
    """
    position, close = 0, 0
    while (match := start.search(word, position)) is not None:
        if match["open"] is None:
            yield match, ""
            position = match.end()
            continue
        if close < match.end():
            found = word.find("}", match.end())
            close = len(word) if found < 0 else found
        if close == len(word):
            position = match.start() + 1
            continue
        yield match, word[match.end() : close]
        position = close + 1



@dataclass(frozen=True)
class Token:
    kind: Literal["word", "op", "newline"]
    text: str
    """The raw text (quotes kept) of a word, or the operator."""
    line: int


_OPERATORS = (";;&", ";;", ";&", "<<<", "<<-", "<<", ">>", "&&", "||", "|&", "&>", ">&", "<&", ";", "|", "&", "(",
              ")", "<", ">")


MAX_NESTING = 64
"""Quotes, $( ), ${ }, functions and case arms nested deeper than this are refused (a real
script nests a few): '"$(' repeated ended in a RecursionError, and 'f() {' repeated 10,000
times named each mode by a path 10,000 functions long (quadratic time and output)."""


def nested_too_deep(line: int) -> InputError:
    return InputError(
        f"the script nests quotes, $( ), ${{ }}, functions or case arms more than {MAX_NESTING} deep "
        f"(line {line}); no serve script does: check that it is the right file"
    )


def _skip_balanced(text: str, i: int, opening: str, closing: str, nesting: int = 0) -> int:
    """From just past an opening bracket, the index just past its matching close (quotes honoured)."""
    if nesting > MAX_NESTING:
        raise nested_too_deep(text.count("\n", 0, i) + 1)
    depth = 1
    n = len(text)
    while i < n and depth:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and opening != "{":
            end = text.find("'", i + 1)
            i = n if end < 0 else end + 1
            continue
        if c == '"':
            i = _skip_double(text, i + 1, nesting + 1)
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
        i += 1
    return i


def _skip_double(text: str, i: int, nesting: int = 0) -> int:
    """From just past an opening double quote, the index just past its closing quote."""
    if nesting > MAX_NESTING:
        raise nested_too_deep(text.count("\n", 0, i) + 1)
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        if text.startswith("$(", i):
            i = _skip_balanced(text, i + 2, "(", ")", nesting + 1)
            continue
        if text.startswith("${", i):
            i = _skip_balanced(text, i + 2, "{", "}", nesting + 1)
            continue
        if c == "`":
            end = text.find("`", i + 1)
            i = n if end < 0 else end + 1
            continue
        i += 1
    return n


def tokenize(text: str) -> list[Token]:
    """bash words and operators with their line numbers; comments and heredoc bodies dropped."""
    tokens: list[Token] = []
    n = len(text)
    i = 0
    line = 1
    heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs)
    expect_delimiter: bool | None = None  # after '<<' / '<<-': the next word is a delimiter

    def newlines(start: int, end: int) -> int:
        return text.count("\n", start, end)

    while i < n:
        c = text[i]
        if c in " \t\r":
            i += 1
            continue
        if c == "\\" and text.startswith("\\\n", i):
            i += 2
            line += 1
            continue
        if c == "\n":
            tokens.append(Token("newline", "\n", line))
            i += 1
            line += 1
            for delimiter, strip_tabs in heredocs:
                # Skip the body: every line up to the delimiter line.
                while i < n:
                    end = text.find("\n", i)
                    end = n if end < 0 else end
                    body_line = text[i:end]
                    i = min(end + 1, n)
                    line += 1
                    if (body_line.lstrip("\t") if strip_tabs else body_line).rstrip("\r") == delimiter:
                        break
            heredocs.clear()
            continue
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is not None:
            tokens.append(Token("op", op, line))
            i += len(op)
            if op in ("<<", "<<-"):
                expect_delimiter = op == "<<-"
            continue
        start = i
        while i < n:
            c = text[i]
            if c in " \t\r\n" or (c in ";&|()<>" and not (c == "(" and i > start and text[i - 1] in "@?*+!")):
                break
            if c == "\\":
                i += 2
            elif c == "'":
                end = text.find("'", i + 1)
                i = n if end < 0 else end + 1
            elif c == '"':
                i = _skip_double(text, i + 1)
            elif text.startswith("$((", i):
                i = _skip_balanced(text, i + 3, "(", ")")
                i = i + 1 if i < n and text[i] == ")" else i
            elif text.startswith("$(", i):
                i = _skip_balanced(text, i + 2, "(", ")")
            elif text.startswith("${", i):
                i = _skip_balanced(text, i + 2, "{", "}")
            elif c == "`":
                end = text.find("`", i + 1)
                i = n if end < 0 else end + 1
            else:
                i += 1
        word = text[start:i]
        tokens.append(Token("word", word, line))
        line += newlines(start, i)
        if expect_delimiter is not None:
            heredocs.append((unquote(word), expect_delimiter))
            expect_delimiter = None
    return tokens


def unquote(word: str) -> str:
    """The word with its quote characters and backslash escapes removed (expansions kept as written)."""
    out: list[str] = []
    i = 0
    n = len(word)
    quote: str | None = None
    while i < n:
        c = word[i]
        if quote == "'":
            if c == "'":
                quote = None
            else:
                out.append(c)
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            out.append(word[i + 1])
            i += 2
            continue
        if c in "'\"" and (quote is None or quote == c):
            quote = None if quote == c else c
            i += 1
            continue
        if word.startswith("${", i) or word.startswith("$(", i):
            end = _skip_balanced(word, i + 2, "{" if word[i + 1] == "{" else "(", "}" if word[i + 1] == "{" else ")")
            out.append(word[i:end])
            i = end
            continue
        out.append(c)
        i += 1
    return "".join(out)
