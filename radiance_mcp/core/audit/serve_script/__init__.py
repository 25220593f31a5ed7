"""The serve-script check, pure: a multi-mode bash serve script and its env file in, findings out.

The rule: no mode of a multi-mode serve script may carry its own shape flags (radiance's
``--max-num-seqs`` or step, host pool and GPU headroom; another engine's window, seats, KV
memory, KV dtype and step): they come from the env file that owns the shape. Whose flags:
the engine named (a service's ``engine`` in the fleet config, or the caller's), else the one
whose launcher the script names (``radiance``, ``vllm serve``, ``python -m sglang.launch_server``,
``llama-server``, ``python -m llama_cpp.server``, a ``vllm/vllm-openai`` image ...); every
spelling of each flag is a fact of core.engine_facts.SHAPE_FLAGS. A script whose engine cannot
be told, that starts two engines, that names nothing of the engine named, or that loads flags
from a file (``--config``) is refused (InputError), never passed.

Ownership is read from the files, never from variable names: the env file is the one the
script sources (``source FILE`` / ``. FILE``, resolved statically where it can be: a path
relative to the script's directory, ``$(dirname "$0")``, ``${BASH_SOURCE%/*}``, a variable
set to one of those), or the one the caller names; an env-file variable owns a flag when
the script passes it to that flag. Findings, each with file, line and the mode it sits in:

- ``literal``: a shape flag given a constant, directly (``--max-num-seqs 8``,
  ``--max-num-batched-tokens=65536``, ``-c 32768``, inside an argv array or a flags string) or
  through a variable the script assigns one (``local mnbt=65536 ... --max-num-batched-tokens "$mnbt"``);
- ``default``: a constant as the fallback of a variable that reaches a shape flag (``${SEATS:-8}``);
- ``override``: the script assigns an env-file variable that reaches a shape flag: the env
  file owns it;
- ``alias``: a second env-file variable for the same flag, used by some modes (no shim, no alias);
- ``unowned``: a shape flag whose value is neither a constant nor an env-file variable
  (computed, or from a variable nothing sets).

With no env file found, only ``literal`` and ``default`` are reported, and the result says so:
which variable owns a flag cannot be known without the file that defines it. A short flag
(``-c``) counts where the engine reads it: after the launcher in its command, never in
``python -c`` or before ``llama-server`` in ``taskset -c 0-7 llama-server``.

The reader is a small bash tokenizer, not a regex over lines: quotes, ``$(...)``, ``${...}``,
comments, heredocs and line continuations are honoured, so a comment or a usage text that
mentions ``--max-num-seqs 8`` does not count. Modes are ``case`` arms, ``if``/``elif``/``else``
branches and functions.

What lives where (imports go down this list, never up; nothing here imports I/O, MCP, the CLI
or the simulator, only the core's errors and engine facts)::

    lexer.py     bash words: tokens, quotes, nesting bounds, names and constants
    parser.py    the script model: scopes (modes), assignments, source lines, launchers, shape-flag uses
    sourcing.py  the env file's variables; the files a script sources, resolved without a run
    tracing.py   where a flag's value comes from, through assignments; the variable owning a flag
    check.py     check_script: the engine, the findings, the modes, the owners and the notes

Callers import from here; the names below are the package's interface.
"""

from radiance_mcp.core.audit.serve_script.check import (
    Finding,
    FindingKind,
    Mode,
    OwnedVar,
    ScriptCheck,
    check_script,
    handles_dry_run,
)
from radiance_mcp.core.audit.serve_script.lexer import MAX_NESTING, Token, tokenize, unquote
from radiance_mcp.core.audit.serve_script.parser import (
    Assignment,
    Launch,
    Scope,
    ScopeKind,
    ScriptModel,
    Use,
    parse_script,
)
from radiance_mcp.core.audit.serve_script.sourcing import EnvFile, EnvVar, SourceLine, parse_env, source_lines

__all__ = [
    "MAX_NESTING", "Assignment", "EnvFile", "EnvVar", "Finding", "FindingKind", "Launch", "Mode", "OwnedVar",
    "Scope", "ScopeKind", "ScriptCheck", "ScriptModel", "SourceLine", "Token", "Use", "check_script",
    "handles_dry_run", "parse_env", "parse_script", "source_lines", "tokenize", "unquote",
]
