"""The serve-script check, pure: a multi-mode bash serve script and its env file in, findings out.

The rule: no mode of a multi-mode serve script may carry its own ``--max-num-seqs`` or step;
both, with the host pool and the GPU headroom, come from the env file that owns the shape.
Ownership is read from the files, never from variable names: the env file is the one the
script sources (``source FILE`` / ``. FILE``, resolved statically where it can be: a path
relative to the script's directory, ``$(dirname "$0")``, ``${BASH_SOURCE%/*}``, a variable
set to one of those), or the one the caller names; an env-file variable owns a flag when
the script passes it to that flag. Findings, each with file, line and the mode it sits in:

- ``literal``: a shaped flag given a number, directly (``--max-num-seqs 8``,
  ``--max-num-batched-tokens=65536``, inside an argv array or a flags string) or through a
  variable the script assigns a number (``local mnbt=65536 ... --max-num-batched-tokens "$mnbt"``);
- ``default``: a number as the fallback of a variable that reaches a shaped flag (``${SEATS:-8}``);
- ``override``: the script assigns an env-file variable that reaches a shaped flag: the env
  file owns it;
- ``alias``: a second env-file variable for the same flag, used by some modes (no shim, no alias);
- ``unowned``: a shaped flag whose value is neither a number nor an env-file variable
  (computed, or from a variable nothing sets).

With no env file found, only ``literal`` and ``default`` are reported, and the result says so:
which variable owns a flag cannot be known without the file that defines it.

The reader is a small bash tokenizer, not a regex over lines: quotes, ``$(...)``, ``${...}``,
comments, heredocs and line continuations are honoured, so a comment or a usage text that
mentions ``--max-num-seqs 8`` does not count. Modes are ``case`` arms, ``if``/``elif``/``else``
branches and functions.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from radiance_mcp.errors import InputError

SHAPED_FLAGS: tuple[str, ...] = ("max-num-seqs", "max-num-batched-tokens", "host-pool-mib", "gpu-headroom-mib")
"""The flags the env file owns."""

FindingKind = Literal["literal", "default", "override", "alias", "unowned"]
ScopeKind = Literal["case arm", "if branch", "function", "top level", "env file"]

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ASSIGNMENT = re.compile(rf"^(?P<name>{_NAME})(?:\[[^\]]*\])?\+?=(?P<value>.*)$", re.S)
_NUMBER = re.compile(r"^[0-9][0-9_,]*$")
_REFERENCE = re.compile(rf"\$(?:(?P<open>\{{)(?P<braced>{_NAME})|(?P<plain>{_NAME}))")
"""$NAME, or the start of ${NAME...}; _braced() finds its close."""
_DEFAULT = re.compile(rf"\$(?P<open>\{{)(?P<name>{_NAME}):?[-=]")
"""The start of ${NAME:-default} (or -, =, :=); _braced() finds its close."""
_PLAIN_REFERENCE = re.compile(rf"\$(?:\{{(?P<braced>{_NAME})\}}|(?P<plain>{_NAME}))")
"""$NAME or ${NAME} with nothing else in the braces: what a static expansion may replace."""
_FLAG_IN_STRING = re.compile(r"(?<![\w-])--(?P<flag>[a-z][a-z0-9-]*)(?:=|\s+)(?P<value>[^\s;|&)]+)")
_DECLARE = frozenset({"local", "export", "declare", "readonly", "typeset"})
_COMMAND_START_WORDS = frozenset({"then", "do", "else", "elif", "if", "while", "until", "!", "time", "{", "}"})


def _braced(start: re.Pattern[str], word: str) -> Iterator[tuple[re.Match[str], str]]:
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


# ---------------------------------------------------------------------------------------
# Tokens


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


def _nested_too_deep(line: int) -> InputError:
    return InputError(
        f"the script nests quotes, $( ), ${{ }}, functions or case arms more than {MAX_NESTING} deep "
        f"(line {line}); no serve script does: check that it is the right file"
    )


def _skip_balanced(text: str, i: int, opening: str, closing: str, nesting: int = 0) -> int:
    """From just past an opening bracket, the index just past its matching close (quotes honoured)."""
    if nesting > MAX_NESTING:
        raise _nested_too_deep(text.count("\n", 0, i) + 1)
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
        raise _nested_too_deep(text.count("\n", 0, i) + 1)
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


# ---------------------------------------------------------------------------------------
# Scopes: case arms and functions


@dataclass
class Scope:
    name: str
    kind: ScopeKind
    first_line: int
    last_line: int = 0
    parent: Scope | None = None

    def path(self) -> str:
        names = []
        scope: Scope | None = self
        while scope is not None and scope.kind != "top level":
            names.append(scope.name)
            scope = scope.parent
        return " > ".join(reversed(names)) or "(top level)"


@dataclass
class _Frame:
    kind: Literal["function", "case", "arm", "if"]
    scope: Scope | None = None
    brace_depth: int = 0
    state: Literal["subject", "pattern", "body"] = "subject"


@dataclass(frozen=True)
class Assignment:
    name: str
    value: str
    """Unquoted, as written (a compound array's words joined by blanks)."""
    line: int
    scope: Scope


@dataclass(frozen=True)
class Use:
    """A shaped flag and the word that gives its value."""

    flag: str
    value: str
    """Unquoted value, expansions as written."""
    line: int
    scope: Scope
    in_string: bool = False
    """True when found inside a flags string (an assignment's value), not as argv words."""


@dataclass
class ScriptModel:
    scopes: list[Scope]
    assignments: list[Assignment]
    uses: list[Use]
    references: list[tuple[str, int, Scope]]
    """Every variable referenced ($NAME, ${NAME...}) with its line and scope."""
    words: list[tuple[str, int, Scope]]
    """Every word, unquoted, with its line and scope."""
    sources: list[tuple[str, int]] = field(default_factory=list)
    """The file word of every 'source FILE' / '. FILE' command, unquoted, with its line."""
    top: Scope = field(default_factory=lambda: Scope("(top level)", "top level", 1))


def _is_function_name(word: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]*", word) is not None


def parse_script(text: str) -> ScriptModel:
    """Scopes (case arms, if branches, functions), assignments, shaped-flag uses and references of a bash script."""
    return _ScriptParser(text).parse()


class _ScriptParser:
    """One pass over the tokens; each step reads the token at ``i`` in one context and advances.

    The contexts, tried in order: inside a compound array ``NAME=( ... )``; a case statement's
    subject and arm patterns; newlines and operators (an arm's ``;;`` closes it); a function
    definition; braces; ``if`` / ``elif`` / ``else`` / ``fi``; ``case`` / ``esac``; an
    assignment; ``local`` / ``export`` / ...; any other word (a flag use, a reference).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.top = Scope("(top level)", "top level", 1, text.count("\n") + 1)
        self.scopes: list[Scope] = []
        self.stack: list[_Frame] = []
        self.assignments: list[Assignment] = []
        self.uses: list[Use] = []
        self.references: list[tuple[str, int, Scope]] = []
        self.words: list[tuple[str, int, Scope]] = []
        self.sources: list[tuple[str, int]] = []
        self.brace_depth = 0
        self.command_start = True
        self.declaring = False
        self.pending_array: tuple[str, int, Scope, list[str]] | None = None
        self.paren_depth_in_array = 0
        self.i = 0

    def parse(self) -> ScriptModel:
        steps = (self._array_item, self._case_head, self._separator, self._function, self._brace,
                 self._if_branch, self._case_keyword, self._assignment)
        while self.i < len(self.tokens):
            if not any(step(self.tokens[self.i]) for step in steps):
                self._word(self.tokens[self.i])
        last = self.text.count("\n") + 1
        for frame in self.stack:
            if frame.scope is not None and not frame.scope.last_line:
                frame.scope.last_line = last
        return ScriptModel(self.scopes, self.assignments, self.uses, self.references, self.words, self.sources,
                           self.top)

    def _current(self) -> Scope:
        for frame in reversed(self.stack):
            if frame.scope is not None and frame.kind in ("function", "arm", "if"):
                return frame.scope
        return self.top

    def _open_scope(self, name: str, kind: ScopeKind, line_no: int) -> Scope:
        if len(self.stack) > MAX_NESTING:
            raise _nested_too_deep(line_no)
        scope = Scope(name, kind, line_no, parent=self._current())
        self.scopes.append(scope)
        return scope

    def _record(self, tok: Token) -> None:
        _record_word(tok, self._current(), self.tokens, self.i, self.uses, self.references, self.words)

    def _next_is(self, offset: int, text: str) -> bool:
        return self.i + offset < len(self.tokens) and self.tokens[self.i + offset].text == text

    def _array_item(self, tok: Token) -> bool:
        """Inside a compound array assignment: collect words up to its ')'."""
        if self.pending_array is None:
            return False
        if tok.kind == "op" and tok.text == ")" and self.paren_depth_in_array == 0:
            name, line_no, scope, items = self.pending_array
            self.assignments.append(Assignment(name, " ".join(items), line_no, scope))
            self.pending_array = None
            self.i += 1
            return True
        if tok.kind == "op" and tok.text == "(":
            self.paren_depth_in_array += 1
        elif tok.kind == "op" and tok.text == ")":
            self.paren_depth_in_array -= 1
        if tok.kind == "word":
            self.pending_array[3].append(unquote(tok.text))
            self._record(tok)
        self.i += 1
        return True

    def _case_head(self, tok: Token) -> bool:
        """A case statement waiting for 'in', or for an arm's pattern (which opens the arm's scope)."""
        frame = self.stack[-1] if self.stack else None
        if frame is None or frame.kind != "case" or frame.state == "body":
            return False
        if frame.state == "subject":
            if tok.kind == "word" and tok.text == "in":
                frame.state = "pattern"
            elif tok.kind == "word":
                self._record(tok)
            self.i += 1
            return True
        if tok.kind == "newline" or (tok.kind == "op" and tok.text == "("):
            self.i += 1
            return True
        if tok.kind == "word" and tok.text == "esac":
            self.stack.pop()
            self.command_start = False
            self.i += 1
            return True
        pattern: list[str] = []
        tokens = self.tokens
        while self.i < len(tokens) and not (tokens[self.i].kind == "op" and tokens[self.i].text == ")"):
            if tokens[self.i].kind == "word":
                pattern.append(unquote(tokens[self.i].text))
                self.words.append((pattern[-1], tokens[self.i].line, self._current()))
            self.i += 1
        self.stack.append(_Frame("arm", self._open_scope("|".join(pattern), "case arm", tok.line)))
        frame.state = "body"
        self.command_start = True
        self.i += 1
        return True

    def _separator(self, tok: Token) -> bool:
        """A newline or an operator: the next word starts a command (except after a redirection)."""
        if tok.kind == "newline":
            self.command_start, self.declaring = True, False
            self.i += 1
            return True
        if tok.kind != "op":
            return False
        frame = self.stack[-1] if self.stack else None
        if tok.text in (";;", ";&", ";;&") and frame is not None and frame.kind == "arm":
            assert frame.scope is not None
            frame.scope.last_line = tok.line
            self.stack.pop()
            self.stack[-1].state = "pattern"
        self.command_start = tok.text not in ("<", ">", ">>", "<<", "<<-", "<<<", "&>", ">&", "<&")
        self.declaring = False
        self.i += 1
        return True

    def _function(self, tok: Token) -> bool:
        """A function definition, 'name () {' or 'function name [()] {': opens the function's scope."""
        if not self.command_start:
            return False
        tokens, n, word = self.tokens, len(self.tokens), tok.text
        if word == "function" and self.i + 1 < n and tokens[self.i + 1].kind == "word":
            name, j = tokens[self.i + 1].text, self.i + 2
            if j + 1 < n and tokens[j].text == "(" and tokens[j + 1].text == ")":
                j += 2
        elif _is_function_name(word) and self.i + 2 < n and self._next_is(1, "(") and self._next_is(2, ")"):
            name, j = word, self.i + 3
        else:
            return False
        while j < n and tokens[j].kind == "newline":
            j += 1
        if j >= n or tokens[j].text != "{":
            return False
        self.brace_depth += 1
        self.stack.append(_Frame("function", self._open_scope(name, "function", tok.line), self.brace_depth))
        self.i, self.command_start = j + 1, True
        return True

    def _brace(self, tok: Token) -> bool:
        """A '{' or '}' at a command's start; the '}' matching a function's closes its scope."""
        if not self.command_start or tok.text not in ("{", "}"):
            return False
        if tok.text == "}":
            frame = self.stack[-1] if self.stack else None
            if frame is not None and frame.kind == "function" and frame.brace_depth == self.brace_depth:
                assert frame.scope is not None
                frame.scope.last_line = tok.line
                self.stack.pop()
            self.brace_depth = max(0, self.brace_depth - 1)
        else:
            self.brace_depth += 1
        self.i += 1
        return True

    def _if_branch(self, tok: Token) -> bool:
        """if / elif / else / fi: each branch is a scope named by its condition."""
        word = tok.text
        if not self.command_start or word not in ("if", "elif", "else", "fi"):
            return False
        frame = self.stack[-1] if self.stack else None
        if word != "if" and frame is not None and frame.kind == "if":
            assert frame.scope is not None
            frame.scope.last_line = tok.line - (word != "fi")
            self.stack.pop()
        if word == "fi":
            self.command_start = False
            self.i += 1
            return True
        if word == "else":
            label = "else"
        else:
            tokens, j, condition = self.tokens, self.i + 1, []
            while j < len(tokens) and not (tokens[j].kind == "word" and tokens[j].text == "then"):
                if tokens[j].kind == "word":
                    condition.append(unquote(tokens[j].text))
                j += 1
            label = f"{word} {' '.join(condition)}"[:80]
        self.stack.append(_Frame("if", self._open_scope(label, "if branch", tok.line)))
        self.command_start = True
        self.i += 1
        return True

    def _case_keyword(self, tok: Token) -> bool:
        """'case' opens a case statement; 'esac' closes its open arm and the statement."""
        if not self.command_start or tok.text not in ("case", "esac"):
            return False
        if tok.text == "case":
            self.stack.append(_Frame("case"))
        else:
            while self.stack and self.stack[-1].kind == "arm":
                arm = self.stack.pop()
                assert arm.scope is not None
                arm.scope.last_line = tok.line
            if self.stack and self.stack[-1].kind == "case":
                self.stack.pop()
            self.command_start = False
        self.i += 1
        return True

    def _assignment(self, tok: Token) -> bool:
        """NAME=value at a command's start (prefix assignments too) or after local/export/...;
        NAME=( starts a compound array."""
        match = _ASSIGNMENT.match(tok.text)
        if not match or not (self.command_start or self.declaring):
            return False
        name = match["name"]
        if match["value"] == "" and self._next_is(1, "(") and self.tokens[self.i + 1].kind == "op":
            self.pending_array = (name, tok.line, self._current(), [])
            self.paren_depth_in_array = 0
            self.i += 2
            return True
        self.assignments.append(Assignment(name, unquote(match["value"]), tok.line, self._current()))
        self._record(tok)
        self.i += 1
        return True

    def _word(self, tok: Token) -> None:
        """Any other word: a declaring keyword, a 'source FILE', or a word of a command (flags, references)."""
        word = tok.text
        if self.command_start and word in _DECLARE:
            self.declaring = True
            self.command_start = False
            self.i += 1
            return
        if (self.command_start and word in ("source", ".") and self.i + 1 < len(self.tokens)
                and self.tokens[self.i + 1].kind == "word"):
            self.sources.append((unquote(self.tokens[self.i + 1].text), tok.line))
        self._record(tok)
        if not (self.declaring and word.startswith("-")):
            self.command_start = word in _COMMAND_START_WORDS
        self.i += 1


def _record_word(
    tok: Token,
    scope: Scope,
    tokens: list[Token],
    index: int,
    uses: list[Use],
    references: list[tuple[str, int, Scope]],
    words: list[tuple[str, int, Scope]],
) -> None:
    value = unquote(tok.text)
    words.append((value, tok.line, scope))
    for ref, _ in _braced(_REFERENCE, tok.text):
        references.append((ref["braced"] or ref["plain"], tok.line, scope))
    for flag in SHAPED_FLAGS:
        if value == f"--{flag}":
            nxt = tokens[index + 1] if index + 1 < len(tokens) else None
            if nxt is not None and nxt.kind == "word":
                uses.append(Use(flag, unquote(nxt.text), tok.line, scope))
        elif value.startswith(f"--{flag}="):
            uses.append(Use(flag, value.split("=", 1)[1], tok.line, scope))
    # A flags string: EXTRA="--max-num-batched-tokens 65536 ..." (only in an assignment's value).
    match = _ASSIGNMENT.match(tok.text)
    if match:
        for found in _FLAG_IN_STRING.finditer(unquote(match["value"])):
            if found["flag"] in SHAPED_FLAGS:
                uses.append(Use(found["flag"], found["value"].strip("'\""), tok.line, scope, in_string=True))


# ---------------------------------------------------------------------------------------
# The env file, and where the script sources it from


@dataclass(frozen=True)
class EnvFile:
    label: str
    """Where it was read (path, host:path, or env_text): findings in it name this."""
    text: str
    path: str | None = None
    """Its path (on its host), to match against the script's source lines; None for text."""


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    line: int
    file: str


def parse_env(text: str, label: str = "env file") -> list[EnvVar]:
    """KEY=value lines of an env file (export allowed, comments and quotes honoured)."""
    return [EnvVar(a.name, a.value, a.line, label) for a in parse_script(text).assignments]


@dataclass(frozen=True)
class SourceLine:
    """One 'source FILE' / '. FILE' of the script, and the file it names if that can be known without running it."""

    word: str
    """The file word as written, quotes removed."""
    line: int
    path: str | None
    """The file, normalised; None when it cannot be resolved statically (see why)."""
    why: str | None


_SCRIPT = r"(?:\$0|\$\{0\}|\$BASH_SOURCE|\$\{BASH_SOURCE(?:\[0\])?\})"
_OPTS = r"(?:\s+-[A-Za-z-]+)*"
_S, _D = "\x00S", "\x00D"
"""Markers for the script's path and its directory while a source word is expanded."""
_DIR_STEPS = (
    # The script's own path, through readlink -f / realpath (the path read is already the real one here).
    (re.compile(_SCRIPT), _S),
    (re.compile(rf"\$\((?:readlink|realpath){_OPTS}\s+{_S}\s*\)"), _S),
    # Its directory: $(dirname "$0"), ${BASH_SOURCE%/*}, $(cd "$(dirname ...)" && pwd).
    (re.compile(rf"\$\(dirname{_OPTS}\s+{_S}\s*\)"), _D),
    (re.compile(r"\$\{(?:0|BASH_SOURCE(?:\[0\])?)%/\*\}"), _D),
    (re.compile(rf"\$\(cd{_OPTS}\s+{_D}(?:\s*[0-9]?>\s*/dev/null|\s*2>&1)*\s*&&\s*pwd{_OPTS}\s*\)"), _D),
)
_MAX_VALUES = 4
"""A variable set to more distinct values than this is not followed (it depends on the run)."""


def _expand(word: str, values: dict[str, set[str]], cache: dict[str, str | None], depth: int = 0) -> str:
    """word with quotes removed and every statically known part replaced: the script's path, its
    directory, and a variable the script sets to one value (once expanded). What stays unknown keeps its '$'."""
    text = word.replace('"', "").replace("'", "")

    def variable(match: re.Match[str]) -> str:
        name = match["braced"] or match["plain"]
        if name not in values or depth >= 4:
            return match[0]
        if name not in cache:
            cache[name] = None  # a variable defined through itself stays unknown
            expanded = {_expand(v, values, cache, depth + 1) for v in values[name]} if (
                len(values[name]) <= _MAX_VALUES) else set()
            cache[name] = expanded.pop() if len(expanded) == 1 else None
        return cache[name] or match[0]

    for _ in range(8):  # nested $(cd "$(dirname "$0")" && pwd) resolves inside out
        before = text
        for pattern, marker in _DIR_STEPS:
            text = pattern.sub(marker, text)
        text = _PLAIN_REFERENCE.sub(variable, text)
        if text == before:
            break
    return text


def source_lines(text: str, script_path: str | None) -> list[SourceLine]:
    """Every file the script sources, resolved where that needs no run: relative paths against the
    script's directory, $0 / BASH_SOURCE forms, variables the script sets to one such value."""
    model = parse_script(text)
    values: dict[str, set[str]] = {}
    for assignment in model.assignments:
        values.setdefault(assignment.name, set()).add(assignment.value)
    cache: dict[str, str | None] = {}
    directory = posixpath.dirname(script_path) if script_path else None
    found = []
    for word, line in model.sources:
        expanded = _expand(word, values, cache)
        why = None
        if "$" in expanded or "`" in expanded or expanded.startswith("~"):
            why = f"{word!r} depends on what only a run of the script knows"
        elif _S in expanded:
            why = f"{word!r} sources the script itself"
        elif directory is None and not expanded.startswith("/"):
            why = f"{word!r} is relative to the script's directory, unknown for a script given as text"
        if why is not None:
            found.append(SourceLine(word, line, None, why))
            continue
        path = expanded.replace(_D, directory or "")
        if not path.startswith("/"):
            path = posixpath.join(directory or "/", path)
        found.append(SourceLine(word, line, posixpath.normpath(path), None))
    return found


# ---------------------------------------------------------------------------------------
# The check


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    file: str
    line: int
    mode: str | None
    """The innermost case arm, if branch or function holding it; None at the top level or in the env file."""
    scope_kind: ScopeKind
    flag: str | None
    variable: str | None
    value: str
    text: str
    """The physical line, stripped."""
    message: str


@dataclass(frozen=True)
class Mode:
    name: str
    kind: ScopeKind
    first_line: int
    last_line: int
    path: str


@dataclass(frozen=True)
class OwnedVar:
    flag: str
    name: str
    value: str
    line: int
    file: str
    """The env file that defines it."""


@dataclass(frozen=True)
class ScriptCheck:
    script: str
    env_files: tuple[str, ...]
    owned: tuple[OwnedVar, ...]
    modes: tuple[Mode, ...]
    findings: tuple[Finding, ...]
    handles_dry_run: bool
    sources_env_file: bool | None
    """None when no env file was given."""
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.findings


def handles_dry_run(text: str) -> bool:
    """True when the script's code (not a comment) mentions --dry-run."""
    return any("--dry-run" in value for value, _, _ in parse_script(text).words)


def _reference_name(value: str) -> tuple[str | None, str | None]:
    """'$X' / '${X}' / '${X:?msg}' -> ('X', None); '${X:-8}' -> ('X', '8'); anything else -> (None, None)."""
    match = re.fullmatch(rf"\$(?:(?P<plain>{_NAME})|\{{(?P<braced>{_NAME})(?P<rest>[^}}]*)\}})", value)
    if not match:
        return None, None
    name = match["plain"] or match["braced"]
    rest = match["rest"] or ""
    default = re.fullmatch(r":?[-=](?P<default>.*)", rest)
    return name, default["default"] if default else None


ReachKind = Literal["env", "literal", "default", "override", "computed", "unset"]


@dataclass(frozen=True)
class _Reach:
    """Where one shaped flag's value comes from, at one place of the script."""

    kind: ReachKind
    line: int
    scope: Scope
    name: str | None
    value: str


class _Tracer:
    """Follows flag values through the script's assignments, each variable once (cached), to a bounded depth."""

    MAX_DEPTH = 32

    def __init__(self, assignments: list[Assignment], env: set[str]) -> None:
        self.by_name: dict[str, list[Assignment]] = {}
        for assignment in assignments:
            self.by_name.setdefault(assignment.name, []).append(assignment)
        self.env = env
        self.cache: dict[str, tuple[bool, list[_Reach]]] = {}

    def trace(self, value: str, line: int, scope: Scope, depth: int = 0) -> list[_Reach]:
        """Where a value at (line, scope) comes from: numbers, env-file variables, or nothing known."""
        if _NUMBER.match(value):
            return [_Reach("literal", line, scope, None, value)]
        name, default = _reference_name(value)
        if name is None:
            return [_Reach("computed", line, scope, None, value)]
        reaches = []
        if default is not None and _NUMBER.match(default):
            reaches.append(_Reach("default", line, scope, name, default))
        assigned, through = self._assigned(name, depth)
        reaches += through
        if name in self.env:
            reaches.append(_Reach("env", line, scope, name, value))
        elif not assigned:
            reaches.append(_Reach("unset", line, scope, name, value))
        return reaches

    def _assigned(self, name: str, depth: int) -> tuple[bool, list[_Reach]]:
        """Whether the script assigns name, and what its assignments reach."""
        if name in self.cache:
            return self.cache[name]
        if depth >= self.MAX_DEPTH:
            return True, []  # too deep to follow: nothing is claimed about it
        self.cache[name] = (True, [])  # a variable defined through itself adds nothing more
        assigned, reaches = False, []
        for a in self.by_name.get(name, []):
            ref, fallback = _reference_name(a.value)
            if ref == name:  # X=${X:-8}: only its fallback counts
                if fallback is not None and _NUMBER.match(fallback):
                    reaches.append(_Reach("default", a.line, a.scope, name, fallback))
                continue
            assigned = True
            if name in self.env:
                reaches.append(_Reach("override", a.line, a.scope, name, a.value))
            elif _NUMBER.match(a.value):
                reaches.append(_Reach("literal", a.line, a.scope, name, a.value))
            else:
                reaches += self.trace(a.value, a.line, a.scope, depth + 1)
        self.cache[name] = (assigned, reaches)
        return assigned, reaches


def _owner(reaches: list[_Reach], order: dict[str, int]) -> str:
    """The env variable that owns a flag: the one the shared part passes, else the most used, else the first defined."""
    def rank(name: str) -> tuple[bool, int, int]:
        mine = [r for r in reaches if r.name == name]
        return (not any(r.scope.kind == "top level" for r in mine), -len(mine), order[name])

    return min({r.name for r in reaches if r.name is not None}, key=rank)


def check_script(
    script_text: str,
    env_files: Sequence[EnvFile] = (),
    *,
    script_name: str = "serve script",
    script_path: str | None = None,
) -> ScriptCheck:
    """Every place a mode (or the shared part) carries its own shaped number, with file and line.

    env_files: the files that define the shape (the ones the script sources, or the one named);
    none: only literal numbers and numeric fallbacks are reported. script_path: where the
    script lives, to tell whether it sources the env file. Three passes share one findings
    table: each shaped flag's value traced to its origin, second variables for an owned flag,
    and numeric fallbacks of an owning variable.
    """
    model = parse_script(script_text)
    check = _Check(script_text, env_files, script_name, model)
    check.trace_values()
    check.aliases()
    check.fallbacks()
    owned = tuple(
        OwnedVar(flag, name, check.env_by_name[name].value, check.env_by_name[name].line, check.env_by_name[name].file)
        for flag, name in check.owners.items()
    )
    sources_env, notes = _notes(check, env_files, script_text, script_path)
    ordered = sorted(check.findings.values(), key=lambda f: (f.file != script_name, f.line, f.kind))
    return ScriptCheck(
        script=script_name,
        env_files=tuple(f.label for f in env_files),
        owned=owned,
        modes=tuple(Mode(s.name, s.kind, s.first_line, s.last_line, s.path()) for s in model.scopes),
        findings=tuple(ordered),
        handles_dry_run=any("--dry-run" in w for w, _, _ in model.words),
        sources_env_file=sources_env,
        notes=tuple(notes),
    )


class _Check:
    """The findings table of one check_script call, and what its passes share: the env file's
    variables, each use's traced origins and the variable that owns each flag."""

    def __init__(self, script_text: str, env_files: Sequence[EnvFile], script_name: str, model: ScriptModel) -> None:
        env_vars = [v for f in env_files for v in parse_env(f.text, f.label)]
        self.env_by_name = {v.name: v for v in env_vars}  # a later file overrides, as bash would
        order = {name: i for i, name in enumerate(self.env_by_name)}
        self.have_env = bool(env_files)
        self.model = model
        self.script_name = script_name
        self.lines = script_text.splitlines()
        self.file_lines = {f.label: f.text.splitlines() for f in env_files}
        self.findings: dict[tuple[str, int, str, str], Finding] = {}
        tracer = _Tracer(model.assignments, set(self.env_by_name))
        self.traced = [(use, tracer.trace(use.value, use.line, use.scope)) for use in model.uses]
        self.reach_by_flag: dict[str, list[_Reach]] = {}
        for use, reaches in self.traced:
            self.reach_by_flag.setdefault(use.flag, []).extend(r for r in reaches if r.kind == "env")
        self.owners = {flag: _owner(reaches, order) for flag, reaches in self.reach_by_flag.items() if reaches}

    def add(self, kind: FindingKind, line: int, scope: Scope | None, flag: str | None, variable: str | None,
            value: str, message: str, file: str | None = None) -> None:
        file = file or self.script_name
        source_lines_ = self.file_lines.get(file, self.lines) if file != self.script_name else self.lines
        text = source_lines_[line - 1].strip() if 0 < line <= len(source_lines_) else ""
        mode = None if scope is None or scope.kind == "top level" else scope.path()
        scope_kind: ScopeKind = "env file" if scope is None else scope.kind
        key = (file, line, kind, variable or flag or value)
        self.findings.setdefault(key, Finding(kind, file, line, mode, scope_kind, flag, variable, value, text,
                                              message))

    @staticmethod
    def where(scope: Scope) -> str:
        return "the shared part of the script" if scope.kind == "top level" else f"mode {scope.path()!r}"

    def take(self, flag: str) -> str:
        if owner := self.owners.get(flag):
            var = self.env_by_name[owner]
            return f"pass \"${owner}\" ({var.file} line {var.line}) as the other modes do"
        if self.have_env:
            return (f"no variable of the env file reaches --{flag}: define the number there once and pass that "
                    "variable in every mode")
        return "take it from the env file that owns the shape, as every other mode must"

    def trace_values(self) -> None:
        """Pass 1: every shaped flag's value, traced to where it comes from."""
        where = self.where
        for use, reaches in self.traced:
            flag = use.flag
            for r in reaches:
                if r.kind == "literal":
                    said = (f"passes --{flag} {r.value} itself" if r.name is None else
                            f"sets {r.name}={r.value}, which reaches --{flag} (line {use.line})")
                    self.add("literal", r.line, r.scope, flag, r.name, r.value,
                             f"{where(r.scope)} {said}; {self.take(flag)}")
                elif r.kind == "default":
                    self.add("default", r.line, r.scope, flag, r.name, r.value,
                             f"{where(r.scope)} falls back to --{flag} {r.value} when {r.name} is unset; the env "
                             f"file owns the number: drop the fallback (${{{r.name}:?}} fails loudly instead)")
                elif r.kind == "override" and r.name is not None:
                    var = self.env_by_name[r.name]
                    self.add("override", r.line, r.scope, flag, r.name, r.value,
                             f"{where(r.scope)} sets {r.name}={r.value}, which the env file defines ({var.file} "
                             f"line {var.line}) for --{flag}: delete the assignment")
                elif r.kind in ("computed", "unset") and self.have_env:
                    said = (f"computes --{flag} as {r.value!r}" if r.kind == "computed" else
                            f"passes --{flag} from {r.name}, which neither the script nor the env file sets")
                    self.add("unowned", r.line, r.scope, flag, r.name, r.value,
                             f"{where(r.scope)} {said}; {self.take(flag)}")

    def aliases(self) -> None:
        """Pass 2: a second env variable for a flag another variable owns, a per-mode alias."""
        for flag, owner in self.owners.items():
            for r in self.reach_by_flag[flag]:
                if r.name is None or r.name == owner:
                    continue
                var = self.env_by_name[r.name]
                self.add("alias", r.line, r.scope, flag, r.name, r.value,
                         f"{self.where(r.scope)} passes --{flag} from {r.name}, while the other modes pass {owner}: "
                         f"two variables for one number; pass \"${owner}\" and delete {r.name} (no shim, no alias)")
                self.add("alias", var.line, None, flag, var.name, var.value,
                         f"the env file defines {var.name}={var.value}, a second variable for --{flag} besides "
                         f"{owner} (line {self.env_by_name[owner].line}): one variable per number, delete it",
                         file=var.file)

    def fallbacks(self) -> None:
        """Pass 3: a numeric fallback of an owning variable anywhere (': "${SEATS:-8}"')."""
        owning = {name: flag for flag, name in self.owners.items()}
        for word, line_no, scope in self.model.words:
            for found, fallback in _braced(_DEFAULT, word):
                owned_flag = owning.get(found["name"])
                if owned_flag is not None and _NUMBER.match(fallback):
                    self.add("default", line_no, scope, owned_flag, found["name"], fallback,
                             f"{self.where(scope)} gives {found['name']} a fallback of {fallback}; the env file owns "
                             "the number: drop the fallback (use ${" + found["name"] + ":?} to fail loudly)")


def _notes(
    check: _Check, env_files: Sequence[EnvFile], script_text: str, script_path: str | None
) -> tuple[bool | None, list[str]]:
    """(whether the script sources a named env file, or None; the notes on what could not be known)."""
    notes: list[str] = []
    if not check.have_env:
        notes.append("no env file: only the numbers the script itself passes to a shaped flag are reported; which "
                     "variable owns each flag cannot be known without the env file")
    else:
        undefined = sorted({(r.name, use.flag) for use, reaches in check.traced for r in reaches
                            if r.kind == "unset" and r.name is not None})
        notes += [f"the env file does not define {name}, which the script passes to --{flag}"
                  for name, flag in undefined]
    named = [f.path for f in env_files if f.path is not None]
    if not named:
        return None, notes
    sourced = source_lines(script_text, script_path)
    resolved = {s.path for s in sourced if s.path is not None}
    unresolved = {posixpath.basename(s.word) for s in sourced if s.path is None}
    sources_env = any(p in resolved or posixpath.basename(p) in unresolved for p in named)
    if not sources_env:
        names = ", ".join(f"{posixpath.basename(p)} ({p})" for p in named)
        notes.append(f"the script never names {names} in a source line: check that every mode sources the "
                     "env file")
    return sources_env, notes
