"""The script model: scopes (case arms, if branches, functions), assignments, source lines,
references, the engines' launchers and every shape flag's value, read in one pass over the
tokens of lexer.tokenize."""

from __future__ import annotations

import posixpath
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
from radiance_mcp.core.constants import LedgerEngine
from radiance_mcp.core.engine_facts import SHAPE_FLAGS, Launcher


def fold(word: str) -> str:
    """A '--' word with each '_' read as '-', as vLLM and llama-server read their flags."""
    return word.replace("_", "-") if word.startswith("--") else word


FLAG_WORDS = frozenset(
    fold(spelling)
    for launchers in SHAPE_FLAGS.values() for launcher in launchers
    for spelling in (*(s for flag in launcher.flags for s in flag.spellings), *launcher.config_flags)
)
"""Every engine's shape and config flags, folded: the words whose values the parser records (check.py keeps the
script's engine's own)."""
_PROGRAMS = {p: (e, launcher) for e, ls in SHAPE_FLAGS.items() for launcher in ls for p in launcher.programs}
_MODULES = {m: (e, launcher) for e, ls in SHAPE_FLAGS.items() for launcher in ls for m in launcher.modules}
_IMAGES = [(i, (e, launcher)) for e, ls in SHAPE_FLAGS.items() for launcher in ls for i in launcher.images]
_OWN_SHORT_OPTIONS = frozenset({
    "bash", "sh", "zsh", "dash", "ksh", "python", "python3", "grep", "egrep", "fgrep", "wc", "head", "tail", "cut",
    "uniq", "sort", "taskset", "curl", "wget", "git", "xargs", "nvidia-smi", "ps", "tar",
})
"""Programs with short options of their own (bash -c, grep -c, taskset -c): a short flag in a command of theirs
that starts no engine is theirs, not the engine's."""
_WRAPPERS = frozenset({"exec", "command", "builtin", "nohup", "time"})

ScopeKind = Literal["case arm", "if branch", "function", "top level", "env file"]
_ASSIGNMENT = re.compile(rf"^(?P<name>{NAME})(?:\[[^\]]*\])?\+?=(?P<value>.*)$", re.S)
_REFERENCE = re.compile(rf"\$(?:(?P<open>\{{)(?P<braced>{NAME})|(?P<plain>{NAME}))")
"""$NAME, or the start of ${NAME...}; braced() finds its close."""
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
    """A shape flag of some engine (FLAG_WORDS) and the word that gives its value."""

    spelling: str
    """The flag as written ('-c', '--ctx_size', '--max-num-seqs')."""
    value: str
    """Unquoted value, expansions as written."""
    line: int
    scope: Scope
    in_string: bool = False
    """True when found inside a flags string (an assignment's value), not as argv words."""
    equals: bool = False
    """Written --flag=value."""


@dataclass(frozen=True)
class Launch:
    """A word that names an engine's launcher: its program, python module or container image."""

    engine: LedgerEngine
    launcher: Launcher
    word: str
    line: int


def launcher_of(word: str) -> tuple[LedgerEngine, Launcher] | None:
    """The engine and launcher a word names: a program by its path's last part, a module, an image reference."""
    found = _PROGRAMS.get(posixpath.basename(word)) or _MODULES.get(word)
    if found is not None:
        return found
    reference = word.removeprefix("docker.io/")
    for image, named in _IMAGES:
        if reference.startswith(image) and reference[len(image):len(image) + 1] in ("", ":", "@", "-"):
            return named
    return None


def command_uses(words: list[tuple[str, int, Scope]], *, in_string: bool = False) -> tuple[list[Use], list[Launch]]:
    """The shape flags and launchers of one command's words (argv words, an array's items, a flags string's words).

    A short flag ('-c') counts where the engine reads it: after a launcher in the command, or, with none
    there, unless the command is a program with short options of its own (python -c, taskset -c 0-7 before
    llama-server). A long flag counts wherever it is written.
    """
    launches: list[Launch] = []
    launched: int | None = None
    """The index of the command's first launcher word."""
    for i, (word, line, _) in enumerate(words):
        if (found := launcher_of(word)) is not None:
            launches.append(Launch(found[0], found[1], word, line))
            launched = i if launched is None else launched
    head = next((posixpath.basename(word.removeprefix("$(")) for word, _, _ in words if word not in _WRAPPERS), "")
    uses: list[Use] = []
    for i, (word, line, scope) in enumerate(words):
        name, equals, value = word.partition("=")
        if not name.startswith("-") or fold(name) not in FLAG_WORDS:
            continue
        if not name.startswith("--") and (
                (launched is not None and i < launched) or (launched is None and head in _OWN_SHORT_OPTIONS)):
            continue
        if not equals:
            if i + 1 >= len(words):
                continue
            value = words[i + 1][0]
        uses.append(Use(name, value.strip("'\"") if in_string else value, line, scope, in_string, bool(equals)))
    return uses, launches


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
    launches: list[Launch] = field(default_factory=list)
    """Every word that names an engine's launcher."""
    top: Scope = field(default_factory=lambda: Scope("(top level)", "top level", 1))


def _is_function_name(word: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]*", word) is not None


def parse_script(text: str) -> ScriptModel:
    """Scopes (case arms, if branches, functions), assignments, shape-flag uses, launchers and references of a
    bash script."""
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
        self.launches: list[Launch] = []
        self.command: list[tuple[str, int, Scope]] = []
        """The words of the simple command being read."""
        self.brace_depth = 0
        self.command_start = True
        self.declaring = False
        self.pending_array: tuple[str, int, Scope, list[tuple[str, int, Scope]]] | None = None
        self.paren_depth_in_array = 0
        self.i = 0

    def parse(self) -> ScriptModel:
        steps = (self._array_item, self._case_head, self._separator, self._function, self._brace,
                 self._if_branch, self._case_keyword, self._assignment)
        while self.i < len(self.tokens):
            if not any(step(self.tokens[self.i]) for step in steps):
                self._word(self.tokens[self.i])
        self._end_command()
        last = self.text.count("\n") + 1
        for frame in self.stack:
            if frame.scope is not None and not frame.scope.last_line:
                frame.scope.last_line = last
        return ScriptModel(self.scopes, self.assignments, self.uses, self.references, self.words, self.sources,
                           self.launches, self.top)

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
        """A word's references and unquoted text; an assignment's value, read as a flags string."""
        value = unquote(tok.text)
        scope = self._current()
        self.words.append((value, tok.line, scope))
        for ref, _ in braced(_REFERENCE, tok.text):
            self.references.append((ref["braced"] or ref["plain"], tok.line, scope))
        match = _ASSIGNMENT.match(tok.text)
        if match:  # EXTRA="--max-num-batched-tokens 65536 ...", BIN=/opt/bin/llama-server
            self._add_command([(word, tok.line, scope) for word in unquote(match["value"]).split()], in_string=True)

    def _add_command(self, words: list[tuple[str, int, Scope]], *, in_string: bool = False) -> None:
        uses, launches = command_uses(words, in_string=in_string)
        self.uses += uses
        self.launches += launches

    def _end_command(self) -> None:
        """The simple command read so far ends (a separator, a keyword that starts the next one)."""
        if self.command:
            self._add_command(self.command)
            self.command = []

    def _next_is(self, offset: int, text: str) -> bool:
        return self.i + offset < len(self.tokens) and self.tokens[self.i + offset].text == text

    def _array_item(self, tok: Token) -> bool:
        """Inside a compound array assignment: collect words up to its ')'."""
        if self.pending_array is None:
            return False
        if tok.kind == "op" and tok.text == ")" and self.paren_depth_in_array == 0:
            name, line_no, scope, items = self.pending_array
            self.assignments.append(Assignment(name, " ".join(word for word, _, _ in items), line_no, scope))
            self._add_command(items)
            self.pending_array = None
            self.i += 1
            return True
        if tok.kind == "op" and tok.text == "(":
            self.paren_depth_in_array += 1
        elif tok.kind == "op" and tok.text == ")":
            self.paren_depth_in_array -= 1
        if tok.kind == "word":
            self.pending_array[3].append((unquote(tok.text), tok.line, self._current()))
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
        if tok.kind in ("newline", "op"):
            self._end_command()
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
        if self.command_start and word in _COMMAND_START_WORDS:
            self._end_command()
        else:
            self.command.append((unquote(word), tok.line, self._current()))
        if not (self.declaring and word.startswith("-")):
            self.command_start = word in _COMMAND_START_WORDS
        self.i += 1

