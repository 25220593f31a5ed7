"""The script model: scopes (case arms, if branches, functions), assignments, source lines,
references and every shaped flag's value, read in one pass over the tokens of lexer.tokenize."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from radiance_mcp.core.audit.serve_script.lexer import (
    MAX_NESTING,
    NAME,
    Token,
    braced,
    nested_too_deep,
    tokenize,
    unquote,
)

SHAPED_FLAGS: tuple[str, ...] = ("max-num-seqs", "max-num-batched-tokens", "host-pool-mib", "gpu-headroom-mib")
"""The flags the env file owns."""

ScopeKind = Literal["case arm", "if branch", "function", "top level", "env file"]
_ASSIGNMENT = re.compile(rf"^(?P<name>{NAME})(?:\[[^\]]*\])?\+?=(?P<value>.*)$", re.S)
_REFERENCE = re.compile(rf"\$(?:(?P<open>\{{)(?P<braced>{NAME})|(?P<plain>{NAME}))")
"""$NAME, or the start of ${NAME...}; braced() finds its close."""
_FLAG_IN_STRING = re.compile(r"(?<![\w-])--(?P<flag>[a-z][a-z0-9-]*)(?:=|\s+)(?P<value>[^\s;|&)]+)")
_DECLARE = frozenset({"local", "export", "declare", "readonly", "typeset"})
_COMMAND_START_WORDS = frozenset({"then", "do", "else", "elif", "if", "while", "until", "!", "time", "{", "}"})


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
            raise nested_too_deep(line_no)
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
    for ref, _ in braced(_REFERENCE, tok.text):
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
