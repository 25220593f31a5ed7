"""The env file's variables, and the files a script sources, resolved without running it."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from radiance_mcp.core.audit.serve_script.lexer import NAME
from radiance_mcp.core.audit.serve_script.parser import parse_script

_PLAIN_REFERENCE = re.compile(rf"\$(?:\{{(?P<braced>{NAME})\}}|(?P<plain>{NAME}))")
"""$NAME or ${NAME} with nothing else in the braces: what a static expansion may replace."""


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
