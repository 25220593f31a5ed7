"""The serve-script check, pure: a multi-mode bash serve script and its env file in, findings out.

The rule (PHRASEBOOK section 6): no mode of a multi-mode serve script may carry its own
``--max-num-seqs`` or step; both, with the host pool and the GPU headroom, come from the env
file that owns the shape (for frank-archon: ``scripts/frank-archon.env`` with
``FRANK_ARCHON_MAX_SEQS``, ``FRANK_ARCHON_MAX_BATCHED_TOKENS``, ``FRANK_ARCHON_HOST_POOL_MIB``,
``FRANK_ARCHON_GPU_HEADROOM_MIB``). Findings, each with file, line and the mode it sits in:

- ``literal``: a shaped flag given a number, directly (``--max-num-seqs 8``,
  ``--max-num-batched-tokens=65536``, inside an argv array or a flags string) or through a
  variable the script assigns a number (``local mnbt=65536 ... --max-num-batched-tokens "$mnbt"``);
- ``default``: a number as the fallback of an owned variable (``${FRANK_ARCHON_MAX_SEQS:-8}``);
- ``override``: the script assigns an owned variable (``FRANK_ARCHON_MAX_SEQS=8``): the env
  file owns it;
- ``alias``: a per-mode alias of an owned variable (``FRANK_ARCHON_BF16_MAX_SEQS``), in the
  script or the env file: no shim, no alias;
- ``unowned``: a shaped flag whose value is neither a number nor traceable to the owned variable.

The reader is a small bash tokenizer, not a regex over lines: quotes, ``$(...)``, ``${...}``,
comments, heredocs and line continuations are honoured, so a comment or a usage text that
mentions ``--max-num-seqs 8`` does not count. Modes are ``case`` arms and functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal

from radiance_mcp.errors import InputError

SHAPED_FLAGS: dict[str, tuple[str, ...]] = {
    # flag -> the owned variable's suffix first, then spellings an alias may use.
    "max-num-seqs": ("MAX_SEQS", "MAX_NUM_SEQS"),
    "max-num-batched-tokens": ("MAX_BATCHED_TOKENS", "MAX_NUM_BATCHED_TOKENS", "MNBT"),
    "host-pool-mib": ("HOST_POOL_MIB", "HOST_POOL"),
    "gpu-headroom-mib": ("GPU_HEADROOM_MIB", "GPU_HEADROOM", "HEADROOM_MIB"),
}
"""The flags the env file owns, and the variable-name suffixes that stand for each."""

FindingKind = Literal["literal", "default", "override", "alias", "unowned"]
ScopeKind = Literal["case arm", "function", "top level", "env file"]

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ASSIGNMENT = re.compile(rf"^(?P<name>{_NAME})(?:\[[^\]]*\])?\+?=(?P<value>.*)$", re.S)
_NUMBER = re.compile(r"^[0-9][0-9_,]*$")
_REFERENCE = re.compile(rf"\$(?:(?P<open>\{{)(?P<braced>{_NAME})|(?P<plain>{_NAME}))")
"""$NAME, or the start of ${NAME...}; _braced() finds its close."""
_DEFAULT = re.compile(rf"\$(?P<open>\{{)(?P<name>{_NAME}):?[-=]")
"""The start of ${NAME:-default} (or -, =, :=); _braced() finds its close."""
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
    kind: Literal["function", "case", "arm"]
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
    top: Scope = field(default_factory=lambda: Scope("(top level)", "top level", 1))


def _is_function_name(word: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]*", word) is not None


def parse_script(text: str) -> ScriptModel:
    """Scopes (case arms and functions), assignments, shaped-flag uses and references of a bash script."""
    tokens = tokenize(text)
    top = Scope("(top level)", "top level", 1, text.count("\n") + 1)
    scopes: list[Scope] = []
    stack: list[_Frame] = []
    assignments: list[Assignment] = []
    uses: list[Use] = []
    references: list[tuple[str, int, Scope]] = []
    words: list[tuple[str, int, Scope]] = []
    brace_depth = 0
    command_start = True
    declaring = False
    pending_array: tuple[str, int, Scope, list[str]] | None = None
    paren_depth_in_array = 0

    def current() -> Scope:
        for frame in reversed(stack):
            if frame.scope is not None and frame.kind in ("function", "arm"):
                return frame.scope
        return top

    def open_scope(name: str, kind: ScopeKind, line_no: int) -> Scope:
        if len(stack) > MAX_NESTING:
            raise _nested_too_deep(line_no)
        scope = Scope(name, kind, line_no, parent=current())
        scopes.append(scope)
        return scope

    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        frame = stack[-1] if stack else None

        # Inside a compound array assignment: collect words up to ')'.
        if pending_array is not None:
            if tok.kind == "op" and tok.text == ")" and paren_depth_in_array == 0:
                name, line_no, scope, items = pending_array
                assignments.append(Assignment(name, " ".join(items), line_no, scope))
                pending_array = None
                i += 1
                continue
            if tok.kind == "op" and tok.text == "(":
                paren_depth_in_array += 1
            elif tok.kind == "op" and tok.text == ")":
                paren_depth_in_array -= 1
            if tok.kind == "word":
                pending_array[3].append(unquote(tok.text))
                _record_word(tok, current(), tokens, i, uses, references, words)
            i += 1
            continue

        # A case statement waiting for its arms' patterns.
        if frame is not None and frame.kind == "case" and frame.state != "body":
            if frame.state == "subject":
                if tok.kind == "word" and tok.text == "in":
                    frame.state = "pattern"
                elif tok.kind == "word":
                    _record_word(tok, current(), tokens, i, uses, references, words)
                i += 1
                continue
            # state == pattern
            if tok.kind == "newline" or (tok.kind == "op" and tok.text == "("):
                i += 1
                continue
            if tok.kind == "word" and tok.text == "esac":
                stack.pop()
                command_start = False
                i += 1
                continue
            pattern: list[str] = []
            while i < n and not (tokens[i].kind == "op" and tokens[i].text == ")"):
                if tokens[i].kind == "word":
                    pattern.append(unquote(tokens[i].text))
                    words.append((pattern[-1], tokens[i].line, current()))
                i += 1
            label = "|".join(pattern)
            stack.append(_Frame("arm", open_scope(label, "case arm", tok.line)))
            frame.state = "body"
            command_start = True
            i += 1
            continue

        if tok.kind == "newline":
            command_start, declaring = True, False
            i += 1
            continue
        if tok.kind == "op":
            if tok.text in (";;", ";&", ";;&") and frame is not None and frame.kind == "arm":
                assert frame.scope is not None
                frame.scope.last_line = tok.line
                stack.pop()
                stack[-1].state = "pattern"
            command_start = tok.text not in ("<", ">", ">>", "<<", "<<-", "<<<", "&>", ">&", "<&")
            declaring = False
            i += 1
            continue

        word = tok.text
        # Functions: 'name () {' or 'function name [()] {'.
        if command_start and word == "function" and i + 1 < n and tokens[i + 1].kind == "word":
            name = tokens[i + 1].text
            j = i + 2
            if j + 1 < n and tokens[j].text == "(" and tokens[j + 1].text == ")":
                j += 2
            while j < n and tokens[j].kind == "newline":
                j += 1
            if j < n and tokens[j].text == "{":
                brace_depth += 1
                stack.append(_Frame("function", open_scope(name, "function", tok.line), brace_depth))
                i, command_start = j + 1, True
                continue
        if (
            command_start
            and _is_function_name(word)
            and i + 2 < n
            and tokens[i + 1].text == "("
            and tokens[i + 2].text == ")"
        ):
            j = i + 3
            while j < n and tokens[j].kind == "newline":
                j += 1
            if j < n and tokens[j].text == "{":
                brace_depth += 1
                stack.append(_Frame("function", open_scope(word, "function", tok.line), brace_depth))
                i, command_start = j + 1, True
                continue
        if command_start and word == "{":
            brace_depth += 1
            i += 1
            continue
        if command_start and word == "}":
            if frame is not None and frame.kind == "function" and frame.brace_depth == brace_depth:
                assert frame.scope is not None
                frame.scope.last_line = tok.line
                stack.pop()
            brace_depth = max(0, brace_depth - 1)
            i += 1
            continue
        if command_start and word == "case":
            stack.append(_Frame("case"))
            i += 1
            continue
        if command_start and word == "esac":
            while stack and stack[-1].kind == "arm":
                arm = stack.pop()
                assert arm.scope is not None
                arm.scope.last_line = tok.line
            if stack and stack[-1].kind == "case":
                stack.pop()
            command_start = False
            i += 1
            continue

        # Assignments: at a command's start (prefix assignments too) or after local/export/...
        match = _ASSIGNMENT.match(word)
        if match and (command_start or declaring):
            name = match["name"]
            if match["value"] == "" and i + 1 < n and tokens[i + 1].text == "(" and tokens[i + 1].kind == "op":
                pending_array = (name, tok.line, current(), [])
                paren_depth_in_array = 0
                i += 2
                continue
            assignments.append(Assignment(name, unquote(match["value"]), tok.line, current()))
            _record_word(tok, current(), tokens, i, uses, references, words)
            i += 1
            continue
        if command_start and word in _DECLARE:
            declaring = True
            command_start = False
            i += 1
            continue
        _record_word(tok, current(), tokens, i, uses, references, words)
        if not (declaring and word.startswith("-")):
            command_start = word in _COMMAND_START_WORDS
        i += 1

    last = text.count("\n") + 1
    for frame in stack:
        if frame.scope is not None and not frame.scope.last_line:
            frame.scope.last_line = last
    return ScriptModel(scopes, assignments, uses, references, words, top)


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
# The env file


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    line: int


def parse_env(text: str) -> list[EnvVar]:
    """KEY=value lines of an env file (export allowed, comments and quotes honoured)."""
    model = parse_script(text)
    return [EnvVar(a.name, a.value, a.line) for a in model.assignments]


def env_prefix(env_vars: list[EnvVar], env_name: str | None) -> str | None:
    """The owned variables' prefix: from a variable ending in an owned suffix, else the file's name.

    ``FRANK_ARCHON_MAX_SEQS`` gives ``FRANK_ARCHON_``; ``frank-archon.env`` gives the same.
    """
    prefixes = [
        var.name[: -len(spellings[0])]
        for var in env_vars
        for spellings in SHAPED_FLAGS.values()
        if var.name.endswith("_" + spellings[0])
    ]
    if prefixes:
        return min(prefixes, key=len)  # FRANK_ARCHON_ over an alias's FRANK_ARCHON_BF16_
    if env_name:
        stem = PurePath(env_name).name.split(".")[0]
        if stem:
            return re.sub(r"[^A-Za-z0-9]+", "_", stem).upper().strip("_") + "_"
    return None


# ---------------------------------------------------------------------------------------
# The check


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    file: str
    line: int
    mode: str | None
    """The innermost case arm or function holding it; None at the top level or in the env file."""
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
    value: str | None
    line: int | None
    """Line in the env file; None when the env file does not define it."""


@dataclass(frozen=True)
class ScriptCheck:
    script: str
    env_file: str | None
    prefix: str
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


def _owned_names(prefix: str) -> dict[str, str]:
    """Owned variable name -> flag."""
    return {prefix + spellings[0]: flag for flag, spellings in SHAPED_FLAGS.items()}


def alias_flag(name: str, prefix: str) -> str | None:
    """The flag a variable stands in for when it is a per-mode alias of an owned variable, else None.

    An alias starts with the owned prefix, is not itself an owned name, and holds one of the
    flag's suffix spellings as whole '_' parts: FRANK_ARCHON_BF16_MAX_SEQS, FRANK_ARCHON_MAX_SEQS_LONG.
    """
    if not name.startswith(prefix) or name in _owned_names(prefix):
        return None
    parts = name[len(prefix) :].split("_")
    for flag, spellings in SHAPED_FLAGS.items():
        for spelling in spellings:
            want = spelling.split("_")
            if any(parts[k : k + len(want)] == want for k in range(len(parts) - len(want) + 1)):
                return flag
    return None


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


def check_script(
    script_text: str,
    env_text: str | None,
    *,
    script_name: str = "serve script",
    env_name: str | None = None,
    prefix: str | None = None,
) -> ScriptCheck:
    """Every place a mode (or the shared part) carries its own shaped number, with file and line."""
    env_vars = parse_env(env_text) if env_text is not None else []
    env_named = env_name is not None
    if env_text is not None and env_name is None:
        env_name = "env file"
    chosen = prefix or env_prefix(env_vars, env_name)
    if chosen is None:
        chosen = env_prefix([], script_name) or ""
    owned_names = _owned_names(chosen)
    env_by_name = {v.name: v for v in env_vars}
    owned = tuple(
        OwnedVar(flag, name, env_by_name[name].value if name in env_by_name else None,
                 env_by_name[name].line if name in env_by_name else None)
        for name, flag in owned_names.items()
    )
    model = parse_script(script_text)
    lines = script_text.splitlines()
    env_lines = env_text.splitlines() if env_text is not None else []
    findings: dict[tuple[str, int, str, str], Finding] = {}

    def add(kind: FindingKind, line: int, scope: Scope | None, flag: str | None, variable: str | None,
            value: str, message: str, file: str = script_name) -> None:
        source_lines = lines if file == script_name else env_lines
        text = source_lines[line - 1].strip() if 0 < line <= len(source_lines) else ""
        mode = None if scope is None or scope.kind == "top level" else scope.path()
        scope_kind: ScopeKind = "env file" if scope is None else scope.kind
        key = (file, line, kind, variable or flag or value)
        findings.setdefault(key, Finding(kind, file, line, mode, scope_kind, flag, variable, value, text, message))

    def where(scope: Scope) -> str:
        return "the shared part of the script" if scope.kind == "top level" else f"mode {scope.path()!r}"

    by_name: dict[str, list[Assignment]] = {}
    for assignment in model.assignments:
        by_name.setdefault(assignment.name, []).append(assignment)

    def owner_of(name: str) -> str | None:
        return owned_names.get(name)

    # 1. Every shaped flag's value.
    for use in model.uses:
        owned_var = chosen + SHAPED_FLAGS[use.flag][0]
        if _NUMBER.match(use.value):
            add("literal", use.line, use.scope, use.flag, None, use.value,
                f"{where(use.scope)} passes --{use.flag} {use.value} itself; take it from {owned_var} in the env file")
            continue
        name, default = _reference_name(use.value)
        if name is None:
            add("unowned", use.line, use.scope, use.flag, None, use.value,
                f"{where(use.scope)} computes --{use.flag} as {use.value!r}; pass \"${owned_var}\" unchanged")
            continue
        if default is not None and _NUMBER.match(default):
            add("default", use.line, use.scope, use.flag, name, default,
                f"{where(use.scope)} falls back to --{use.flag} {default} when {name} is unset; the env file "
                f"owns the number: use \"${owned_var}\" and let a missing value fail")
        flag_of_alias = alias_flag(name, chosen)
        if flag_of_alias is not None:
            add("alias", use.line, use.scope, use.flag, name, use.value,
                f"{where(use.scope)} passes --{use.flag} from {name}, a per-mode alias of {owned_var}: "
                "no shim, no alias; use the env file's variable")
            continue
        if name == owned_var:
            continue
        if name in owned_names:
            add("unowned", use.line, use.scope, use.flag, name, use.value,
                f"{where(use.scope)} passes --{use.flag} from {name}, which the env file owns for "
                f"--{owned_names[name]}; use {owned_var}")
            continue
        # A local variable: follow its assignments to a number, the owned variable or nothing.
        resolved = _resolve(name, by_name, owned_var, set())
        if resolved == "owned":
            continue
        if isinstance(resolved, list) and resolved:
            for assignment in resolved:
                add("literal", assignment.line, assignment.scope, use.flag, assignment.name, assignment.value,
                    f"{where(assignment.scope)} sets {assignment.name}={assignment.value}, which reaches "
                    f"--{use.flag} (line {use.line}); take it from {owned_var} in the env file")
            continue
        if name in env_by_name:
            continue  # defined by the env file: its own business (aliases are reported below)
        add("unowned", use.line, use.scope, use.flag, name, use.value,
            f"{where(use.scope)} passes --{use.flag} from {name}, which neither the script nor the env file "
            f"sets to {owned_var}; use \"${owned_var}\"")

    # 2. The script assigns an owned variable, or gives it a numeric default anywhere.
    for assignment in model.assignments:
        flag = owner_of(assignment.name)
        if flag is not None:
            ref, _ = _reference_name(assignment.value)
            if ref == assignment.name:
                continue  # X=${X} / X=${X:-8}: the default is reported below
            add("override", assignment.line, assignment.scope, flag, assignment.name, assignment.value,
                f"{where(assignment.scope)} sets {assignment.name}={assignment.value}; the env file owns "
                f"{assignment.name}: delete the assignment")
    for word, line_no, scope in model.words:
        for found, fallback in _braced(_DEFAULT, word):
            flag = owner_of(found["name"])
            if flag is not None and _NUMBER.match(fallback):
                add("default", line_no, scope, flag, found["name"], fallback,
                    f"{where(scope)} gives {found['name']} a fallback of {fallback}; the env file owns "
                    "the number: drop the fallback (use ${" + found["name"] + ":?} to fail loudly)")

    # 3. Aliases, in the script and the env file.
    for name, line_no, scope in model.references:
        flag = alias_flag(name, chosen)
        if flag is not None:
            add("alias", line_no, scope, flag, name, name,
                f"{where(scope)} uses {name}, a per-mode alias of {chosen + SHAPED_FLAGS[flag][0]}: no shim, "
                "no alias")
    for assignment in model.assignments:
        flag = alias_flag(assignment.name, chosen)
        if flag is not None:
            add("alias", assignment.line, assignment.scope, flag, assignment.name, assignment.value,
                f"{where(assignment.scope)} defines {assignment.name}, a per-mode alias of "
                f"{chosen + SHAPED_FLAGS[flag][0]}: delete it")
    for var in env_vars:
        flag = alias_flag(var.name, chosen)
        if flag is not None:
            assert env_name is not None
            add("alias", var.line, None, flag, var.name, var.value,
                f"the env file defines {var.name}, a per-mode alias of {chosen + SHAPED_FLAGS[flag][0]}: one "
                "variable per number, delete the alias", file=env_name)

    notes: list[str] = []
    if env_text is not None:
        missing = [o.name for o in owned if o.line is None]
        if missing:
            notes.append(f"the env file does not define {', '.join(missing)}")
    if not chosen:
        notes.append("no variable prefix could be derived: pass the env file or env_prefix")
    sources_env = None
    if env_name is not None and env_named:
        base = PurePath(env_name).name
        sources_env = any(base in w for w, _, _ in model.words)
        if not sources_env:
            notes.append(f"the script never names {base}: check that every mode sources the env file")
    modes = tuple(Mode(s.name, s.kind, s.first_line, s.last_line, s.path()) for s in model.scopes)
    ordered = sorted(findings.values(), key=lambda f: (f.file != script_name, f.line, f.kind))
    return ScriptCheck(
        script=script_name,
        env_file=env_name,
        prefix=chosen,
        owned=owned,
        modes=modes,
        findings=tuple(ordered),
        handles_dry_run=any("--dry-run" in w for w, _, _ in model.words),
        sources_env_file=sources_env,
        notes=tuple(notes),
    )


def _resolve(
    name: str, by_name: dict[str, list[Assignment]], owned_var: str, seen: set[str]
) -> Literal["owned"] | list[Assignment] | None:
    """Where a variable's value comes from: 'owned', the assignments that give it a number, or None."""
    if name == owned_var:
        return "owned"
    if name in seen:
        return None
    seen.add(name)
    numbers: list[Assignment] = []
    reaches_owned = False
    for assignment in by_name.get(name, []):
        if _NUMBER.match(assignment.value):
            numbers.append(assignment)
            continue
        ref, default = _reference_name(assignment.value)
        if ref is not None:
            inner = _resolve(ref, by_name, owned_var, seen)
            if inner == "owned":
                reaches_owned = True
            elif isinstance(inner, list):
                numbers.extend(inner)
            if default is not None and _NUMBER.match(default) and ref != owned_var:
                numbers.append(assignment)
    if numbers:
        return numbers
    if reaches_owned:
        return "owned"
    return None
