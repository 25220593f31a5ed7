"""The check: the engine the script starts, each of that engine's shape flags' values traced to its
origin, second variables for an owned flag and constant fallbacks of an owning variable, as findings
with file, line and mode; a script whose engine or flags cannot be read is refused."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from radiance_mcp.core.audit.serve_script.lexer import CONSTANT, NAME, braced
from radiance_mcp.core.audit.serve_script.parser import Launch, Scope, ScopeKind, ScriptModel, Use, fold, parse_script
from radiance_mcp.core.audit.serve_script.sourcing import EnvFile, parse_env, source_lines
from radiance_mcp.core.audit.serve_script.tracing import Reach, Tracer, owner_of
from radiance_mcp.core.constants import LedgerEngine
from radiance_mcp.core.engine_facts import SHAPE_FLAGS, Flag, Launcher
from radiance_mcp.core.errors import InputError

FindingKind = Literal["literal", "default", "override", "alias", "unowned"]
_DEFAULT = re.compile(rf"\$(?P<open>\{{)(?P<name>{NAME}):?[-=]")
"""The start of ${NAME:-default} (or -, =, :=); braced() finds its close."""


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
    engine: LedgerEngine
    """Whose flags were read: the engine named, or the one the script starts."""
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


def check_script(
    script_text: str,
    env_files: Sequence[EnvFile] = (),
    *,
    script_name: str = "serve script",
    script_path: str | None = None,
    engine: LedgerEngine | None = None,
    engine_from: str = "engine",
) -> ScriptCheck:
    """Every place a mode (or the shared part) carries its own shape value, with file and line.

    env_files: the files that define the shape (the ones the script sources, or the one named);
    none: only constants and constant fallbacks are reported. script_path: where the script
    lives, to tell whether it sources the env file. engine: whose flags to read (engine_from
    names where it was given, for messages); None: the engine whose launcher the script names.
    Refused (InputError): a script whose engine cannot be told, that starts another engine than
    the one named, that names nothing of it, or that loads flags from a file (vllm --config).
    Three passes share one findings table: each shape flag's value traced to its origin, second
    variables for an owned flag, and constant fallbacks of an owning variable.
    """
    model = parse_script(script_text)
    read = _read_engine(model, engine, engine_from, script_name)
    check = _Check(script_text, env_files, script_name, model, read)
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
        engine=read.engine,
        env_files=tuple(f.label for f in env_files),
        owned=owned,
        modes=tuple(Mode(s.name, s.kind, s.first_line, s.last_line, s.path()) for s in model.scopes),
        findings=tuple(ordered),
        handles_dry_run=any("--dry-run" in w for w, _, _ in model.words),
        sources_env_file=sources_env,
        notes=(*read.notes, *notes),
    )


_ROLE_WORDS = {"window": "window", "seats": "seats", "kv_memory": "KV memory", "kv_dtype": "KV dtype",
               "step": "step", "host_pool": "host pool", "headroom": "headroom"}


@dataclass(frozen=True)
class _Read:
    """The script's engine and its shape flags as the script writes them."""

    engine: LedgerEngine
    shaped: list[tuple[Use, str]]
    """Each use of one of the engine's shape flags, with the flag's name (its long spelling, no dashes)."""
    notes: tuple[str, ...]


class _FlagTable:
    """The engine's flag words, each to its launcher and flag (None: a config-file flag): as spelled, and folded
    for the launchers that fold a '--' word's '_' into '-'."""

    def __init__(self, engine: LedgerEngine) -> None:
        self.exact: dict[str, tuple[Launcher, Flag | None]] = {}
        self.folded: dict[str, tuple[Launcher, Flag | None]] = {}
        for launcher in SHAPE_FLAGS[engine]:
            table = self.folded if launcher.folds_underscores else self.exact
            for flag, spelling in (*((f, s) for f in launcher.flags for s in f.spellings),
                                   *((None, s) for s in launcher.config_flags)):
                table[fold(spelling) if launcher.folds_underscores else spelling] = (launcher, flag)

    def of(self, spelling: str) -> tuple[Launcher, Flag | None] | None:
        return self.exact.get(spelling) or self.folded.get(fold(spelling))


def _launcher_words(engine: LedgerEngine) -> str:
    return ", ".join(
        word for launcher in SHAPE_FLAGS[engine]
        for word in (*launcher.programs, *(f"python -m {m}" for m in launcher.modules),
                     *(f"the {i} image" for i in launcher.images))
    )


def _flag_words(engine: LedgerEngine, launchers: Sequence[Launcher]) -> str:
    """'window -c/--ctx-size, seats ...', each launcher's named where the engine has several."""
    return "; ".join(
        ("" if launcher.name == engine else f"{launcher.name}: ")
        + ", ".join(f"{_ROLE_WORDS[flag.role]} {'/'.join(flag.spellings)}" for flag in launcher.flags)
        for launcher in launchers
    )


def _read_engine(model: ScriptModel, named: LedgerEngine | None, engine_from: str, script_name: str) -> _Read:
    """Whose flags the script passes: the engine named (engine_from says where), else the one it starts; refused
    (InputError) where that cannot be read from the script."""
    started: dict[LedgerEngine, Launch] = {}
    for launch in model.launches:
        started.setdefault(launch.engine, launch)
    if named is None:
        if not started:
            known = "; ".join(f"{e}: {_launcher_words(e)}" for e in SHAPE_FLAGS)
            raise InputError(
                f"{script_name}: which engine it starts cannot be told, so neither can which flags set its shape: no "
                f"word of its code names a launcher the check knows ({known}). Name the engine: "
                + (f"set {engine_from} = \"...\" in the fleet config" if engine_from.startswith("services.") else
                   f"pass {engine_from}") + f" (one of {', '.join(SHAPE_FLAGS)})"
            )
        if len(started) > 1:
            said = ", ".join(f"{e} at line {launch.line} ({launch.word!r})" for e, launch in started.items())
            raise InputError(
                f"{script_name} starts more than one engine ({said}); the check reads one engine's flags per "
                "script: check that it is the right file"
            )
        engine: LedgerEngine = next(iter(started))
        source = f"started at line {started[engine].line}: {started[engine].word!r}"
    else:
        engine, source = named, f"from {engine_from}"
        others = [launch for e, launch in started.items() if e != engine]
        if others:
            raise InputError(
                f"{script_name}: {engine_from} says {engine}, but line {others[0].line} starts {others[0].engine} "
                f"({others[0].word!r}): its flags would be read as {engine}'s, so it is not checked; correct "
                f"{engine_from}, or check the script that starts {engine}"
            )
    table = _FlagTable(engine)
    shaped: list[tuple[Use, str]] = []
    notes: list[str] = []
    used: dict[str, Launcher] = {}
    for use in model.uses:
        found = table.of(use.spelling)
        if found is None:
            continue
        launcher, flag = found
        used[launcher.name] = launcher
        if flag is None:
            raise InputError(
                f"{script_name} line {use.line} passes {use.spelling} {use.value} to {launcher.name}, which reads "
                "more flags from that file: the check does not read it, so a mode's own window or seats set there "
                "would pass unseen; pass the shape flags on the command line (from the env file) to have them checked"
            )
        if use.equals and not launcher.takes_equals:
            notes.append(f"line {use.line}: {launcher.name} reads no {use.spelling}=VALUE form (it takes the value "
                         f"from the next word, and refuses the word at launch): write {use.spelling} {use.value}")
        shaped.append((use, flag.spellings[0].lstrip("-")))
    if engine not in started and not shaped:
        raise InputError(
            f"{script_name}: nothing in it starts {engine} ({_launcher_words(engine)}) or passes one of its shape "
            f"flags ({_flag_words(engine, SHAPE_FLAGS[engine])}), so whether a mode sets its own shape cannot be read: "
            f"check that this is the serve script of a {engine} service ({engine_from} says {engine})"
        )
    for launch in model.launches:
        used.setdefault(launch.launcher.name, launch.launcher)
    owns = _flag_words(engine, list(used.values()))
    notes.insert(0, f"engine {engine} ({source}); the flags the env file owns: {owns}")
    return _Read(engine, shaped, tuple(notes))


class _Check:
    """The findings table of one check_script call, and what its passes share: the env file's
    variables, each use's traced origins and the variable that owns each flag."""

    def __init__(self, script_text: str, env_files: Sequence[EnvFile], script_name: str, model: ScriptModel,
                 read: _Read) -> None:
        env_vars = [v for f in env_files for v in parse_env(f.text, f.label)]
        self.env_by_name = {v.name: v for v in env_vars}  # a later file overrides, as bash would
        order = {name: i for i, name in enumerate(self.env_by_name)}
        self.have_env = bool(env_files)
        self.model = model
        self.script_name = script_name
        self.lines = script_text.splitlines()
        self.file_lines = {f.label: f.text.splitlines() for f in env_files}
        self.findings: dict[tuple[str, int, str, str], Finding] = {}
        tracer = Tracer(model.assignments, set(self.env_by_name))
        self.traced = [(use, flag, tracer.trace(use.value, use.line, use.scope)) for use, flag in read.shaped]
        self.reach_by_flag: dict[str, list[Reach]] = {}
        for _, flag, reaches in self.traced:
            self.reach_by_flag.setdefault(flag, []).extend(r for r in reaches if r.kind == "env")
        self.owners = {flag: owner_of(reaches, order) for flag, reaches in self.reach_by_flag.items() if reaches}

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
            return (f"no variable of the env file reaches --{flag}: define the value there once and pass that "
                    "variable in every mode")
        return "take it from the env file that owns the shape, as every other mode must"

    def trace_values(self) -> None:
        """Pass 1: every shape flag's value, traced to where it comes from."""
        where = self.where
        for use, flag, reaches in self.traced:
            written = use.spelling
            for r in reaches:
                if r.kind == "literal":
                    said = (f"passes {written} {r.value} itself" if r.name is None else
                            f"sets {r.name}={r.value}, which reaches {written} (line {use.line})")
                    self.add("literal", r.line, r.scope, flag, r.name, r.value,
                             f"{where(r.scope)} {said}; {self.take(flag)}")
                elif r.kind == "default":
                    self.add("default", r.line, r.scope, flag, r.name, r.value,
                             f"{where(r.scope)} falls back to {written} {r.value} when {r.name} is unset; the env "
                             f"file owns the value: drop the fallback (${{{r.name}:?}} fails loudly instead)")
                elif r.kind == "override" and r.name is not None:
                    var = self.env_by_name[r.name]
                    self.add("override", r.line, r.scope, flag, r.name, r.value,
                             f"{where(r.scope)} sets {r.name}={r.value}, which the env file defines ({var.file} "
                             f"line {var.line}) for {written}: delete the assignment")
                elif r.kind in ("computed", "unset") and self.have_env:
                    said = (f"computes {written} as {r.value!r}" if r.kind == "computed" else
                            f"passes {written} from {r.name}, which neither the script nor the env file sets")
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
                         f"two variables for one value; pass \"${owner}\" and delete {r.name} (no shim, no alias)")
                self.add("alias", var.line, None, flag, var.name, var.value,
                         f"the env file defines {var.name}={var.value}, a second variable for --{flag} besides "
                         f"{owner} (line {self.env_by_name[owner].line}): one variable per value, delete it",
                         file=var.file)

    def fallbacks(self) -> None:
        """Pass 3: a constant fallback of an owning variable anywhere (': "${SEATS:-8}"')."""
        owning = {name: flag for flag, name in self.owners.items()}
        for word, line_no, scope in self.model.words:
            for found, fallback in braced(_DEFAULT, word):
                owned_flag = owning.get(found["name"])
                if owned_flag is not None and CONSTANT.match(fallback):
                    self.add("default", line_no, scope, owned_flag, found["name"], fallback,
                             f"{self.where(scope)} gives {found['name']} a fallback of {fallback}; the env file owns "
                             "the value: drop the fallback (use ${" + found["name"] + ":?} to fail loudly)")


def _notes(
    check: _Check, env_files: Sequence[EnvFile], script_text: str, script_path: str | None
) -> tuple[bool | None, list[str]]:
    """(whether the script sources a named env file, or None; the notes on what could not be known)."""
    notes: list[str] = []
    if not check.have_env:
        notes.append("no env file: only the values the script itself passes to a shape flag are reported; which "
                     "variable owns each flag cannot be known without the env file")
    else:
        undefined = sorted({(r.name, flag) for _, flag, reaches in check.traced for r in reaches
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
