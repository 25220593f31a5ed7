"""What tools/list publishes of each tool, derived from its models, and kept so a start need not derive it.

``derive`` builds the published form of every tool from its declaration: the name, title and
description (its docstring), its MCP annotations, the flat inputSchema of its input model (no
other names allowed) and the top level of its output model's schema; and the HTTP transport's
body limit, the largest call any input schema allows. Deriving it builds every tool's pydantic
models (about 80 classes) and generates their schemas: most of the server's start beyond the
SDK's own import.

The result is the same for the same code, so ``load`` keeps it as a JSON file in the user's
cache directory (``$XDG_CACHE_HOME/radiance-mcp``, else ``~/.cache/radiance-mcp``), named by a
digest of every source file of this package and the versions of Python, pydantic (which writes
the schemas) and the MCP SDK (whose StrictJsonSchema checks the outputs'). A start that finds it
publishes from it and imports each tool's code on its first call. Any change to the code or
those versions names another file, so a kept copy is never used for other code. Only a directory
this user owns and no one else can write is used, and in it only a regular file of this user's
that no one else can write is read (opened without blocking or following a symlink, then checked);
a file that cannot be read, fails its checks or cannot be written, or a directory that is not
used, costs only the time of deriving again.
tests/test_published.py holds the kept and the derived form equal.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import secrets
import stat
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from radiance_mcp.app import schemas
from radiance_mcp.tools import ToolSpec, tool_names

FORMAT = 1
"""The layout of a kept file; another layout is another name."""
PACKAGE_DIR = Path(__file__).resolve().parents[1]

JSON_BYTES_PER_CHAR = 12
"""The most bytes JSON may spend on one character of a string: an escaped astral character
('\\ud83d\\ude00', as Python's json.dumps writes it) is one character to maxLength, 12 bytes."""
ENVELOPE_BYTES = 64 * 1024
"""The JSON-RPC envelope around a call's arguments (method, id, tool name, _meta)."""

KEPT = 8
"""Kept copies in the directory, newest first: one per version of the code (several venvs may share a home)."""

TOOL_KEYS = {"name": str, "title": str, "description": str, "input_schema": dict, "output_schema": dict,
             "read_only": bool, "open_world": bool, "idempotent": bool}
"""Each tool's published form, and the type of each part (a kept file is checked against them)."""


@functools.cache
def load() -> dict[str, Any]:
    """The published form of every tool: kept from an earlier start of the same code, else derived (and kept)."""
    place = _cache_place()
    if place is None:
        return derive()
    dir_fd, name = place
    try:
        kept = _read_kept(dir_fd, name)
        if kept is not None:
            return kept
        derived = derive()
        _keep(dir_fd, name, derived)
        return derived
    finally:
        os.close(dir_fd)


def derive() -> dict[str, Any]:
    """The published form of every tool, from its models (imports every tool family)."""
    from radiance_mcp.tools import TOOLS

    return {
        "format": FORMAT,
        "tools": [{
            "name": spec.name,
            "title": spec.title,
            "description": inspect.getdoc(spec.run) or "",
            "input_schema": input_schema(spec.input_model),
            "output_schema": output_schema(spec.output_model),
            "read_only": spec.read_only,
            "open_world": spec.open_world,
            "idempotent": spec.idempotent,
        } for spec in TOOLS],
        "body_limit_bytes": request_body_limit_bytes(TOOLS),
    }


class _ArgumentsJsonSchema(GenerateJsonSchema):
    """pydantic's JSON schema, with an argument's default_factory called for its default ([] for
    an omitted list), as the SDK publishes a default."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        return super().get_default_value(schema)


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A tool's published inputSchema: the input model's fields, compact, and no other names
    (additionalProperties false: what the server enforces); the model's own title and docstring
    are not published (the tool's description says it)."""
    full = model.model_json_schema(schema_generator=_ArgumentsJsonSchema)
    flat = {key: value for key, value in full.items() if key not in ("additionalProperties", "description")}
    return schemas.compact({**flat, "additionalProperties": False}, arguments=True)


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A tool's published outputSchema: the top level of its output model (schemas.shallow).

    pydantic describes each nested model as an object here without walking its fields, which
    the top level does not show (the full schema, served as a resource, does). The SDK's
    StrictJsonSchema raises where pydantic would only warn of an output it cannot describe.
    """
    from mcp.server.mcpserver.utilities.func_metadata import StrictJsonSchema

    class TopLevel(StrictJsonSchema):
        def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
            return super().model_schema(schema) if schema["cls"] is model else {"type": "object"}

    return schemas.shallow(model.model_json_schema(schema_generator=TopLevel))


def _max_json_bytes(schema: dict[str, Any], defs: dict[str, Any]) -> int:
    """The largest JSON text a value of this schema can take; a string without maxLength is a bug."""
    if "$ref" in schema:
        return _max_json_bytes(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return max(_max_json_bytes(arm, defs) for arm in schema["anyOf"])
    kind = schema.get("type")
    if "enum" in schema or "const" in schema:
        return max(len(json.dumps(v)) for v in schema.get("enum", [schema.get("const")]))
    if kind == "string":
        return 2 + JSON_BYTES_PER_CHAR * int(schema["maxLength"])
    if kind == "array":
        return 2 + int(schema["maxItems"]) * (1 + _max_json_bytes(schema["items"], defs))
    if kind == "object":
        return 2 + sum(len(name) + 4 + _max_json_bytes(prop, defs) for name, prop in schema["properties"].items())
    return 32  # a number, a boolean, null: bounded by the schema's maximum, a JSON number is short


def request_body_limit_bytes(specs: list[ToolSpec]) -> int:
    """The HTTP transport's body limit: the largest call any tool's input model allows.

    A call the schemas accept must reach the tool (and its clear errors), never the
    transport's plain-text 413; anything larger is refused before it is parsed.
    """
    largest = 0
    for spec in specs:
        schema = spec.input_model.model_json_schema()
        try:
            largest = max(largest, _max_json_bytes(schema, schema.get("$defs", {})))
        except KeyError as exc:  # a programming error, caught by tests/hostile/test_arguments.py too
            raise RuntimeError(f"{spec.name}: an argument has no {exc.args[0]}; give every one a cap") from exc
    return ENVELOPE_BYTES + largest


# ---------------------------------------------------------------------------------------
# The kept copy


def cache_dir() -> Path | None:
    """Where kept copies go: $XDG_CACHE_HOME/radiance-mcp, else ~/.cache/radiance-mcp (None without a home)."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:
            return None
    return Path(base) / "radiance-mcp"


def digest() -> str:
    """Names the code a kept copy was derived from: every source file of the package, and the versions."""
    import pydantic
    import pydantic_core

    try:
        sdk = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        sdk = "none"
    h = hashlib.sha256(f"{FORMAT} {sys.version} {pydantic.VERSION} {pydantic_core.__version__} {sdk}".encode())
    root = str(PACKAGE_DIR)
    sources = []
    for directory, subdirectories, names in os.walk(root):  # os.walk: a third of pathlib's rglob here
        subdirectories[:] = [name for name in subdirectories if name != "__pycache__"]
        sources += [os.path.join(directory, name) for name in names if name.endswith(".py")]
    for path in sorted(sources):
        with open(path, "rb") as file:
            h.update(b"\0" + os.path.relpath(path, root).encode() + b"\0" + file.read())
    return h.hexdigest()[:32]


PRIVATE_MODE_BITS = stat.S_IWGRP | stat.S_IWOTH
"""A kept copy and its directory are writable by their owner alone."""


def _private(st: os.stat_result, kind: int) -> bool:
    """A file of that kind (stat.S_IFREG, S_IFDIR) this process's user owns and no one else can write.

    Security: whoever can write the copy, or the directory it is in, sets what every tool publishes
    (the descriptions and schemas an agent follows, the HTTP transport's body limit). The effective
    uid is whose files this process writes.
    """
    return stat.S_IFMT(st.st_mode) == kind and st.st_uid == os.geteuid() and not st.st_mode & PRIVATE_MODE_BITS


def _cache_place() -> tuple[int, str] | None:
    """The cache directory, open, and the kept copy's name in it; None without a directory this user alone
    can write (not this user's, writable by others, not a directory): nothing is then read or written there.

    The directory is opened once (a symlink to it followed, its target checked) and every later step works
    in the opened directory, so a name swapped meanwhile cannot point the reads and writes elsewhere.
    """
    directory = cache_dir()
    if directory is None:
        return None
    try:
        name = f"published-{digest()}.json"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # a source file unreadable, or no directory to be had: derive, keep nothing
        return None
    if _private(os.fstat(dir_fd), stat.S_IFDIR):
        return dir_fd, name
    os.close(dir_fd)
    return None


def _read_kept(dir_fd: int, name: str) -> dict[str, Any] | None:
    """The kept copy, if it is there, is this user's regular file that no one else can write, and holds
    every tool in order; None otherwise.

    Security: the name is opened without blocking and without following a symlink, and the opened
    file is what is checked: a FIFO (anyone's) opened plainly waits for a writer with no time limit,
    and tools/list would never answer.
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as file:
            if not _private(os.fstat(fd), stat.S_IFREG):
                return None
            kept = json.load(file)
    except (OSError, ValueError):
        return None
    return kept if _well_formed(kept) else None


def _well_formed(kept: Any) -> bool:
    if not isinstance(kept, dict) or kept.get("format") != FORMAT or not isinstance(kept.get("tools"), list):
        return False
    if not isinstance(kept.get("body_limit_bytes"), int) or kept["body_limit_bytes"] <= ENVELOPE_BYTES:
        return False
    tools = kept["tools"]
    return [tool.get("name") if isinstance(tool, dict) else None for tool in tools] == tool_names() and all(
        set(tool) == set(TOOL_KEYS) and all(isinstance(tool[key], kind) for key, kind in TOOL_KEYS.items())
        for tool in tools
    )


def _keep(dir_fd: int, name: str, published: dict[str, Any]) -> None:
    """Write the copy whole or not at all, readable by this user alone: a new file renamed over the name, so
    whatever was there (a damaged copy, another user's file, a FIFO) is replaced, never written into or
    through. Then prune the copies past the newest KEPT."""
    temporary = f".published-{secrets.token_hex(8)}.tmp"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(published, file, separators=(",", ":"))
            os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            os.unlink(temporary, dir_fd=dir_fd)
            raise
        with os.scandir(dir_fd) as entries:
            copies = [(entry.stat(follow_symlinks=False).st_mtime_ns, entry.name) for entry in entries
                      if entry.name.startswith("published-") and entry.name.endswith(".json")]
        for _, stale in sorted(copies, reverse=True)[KEPT:]:
            with contextlib.suppress(FileNotFoundError):  # another start pruned it first
                os.unlink(stale, dir_fd=dir_fd)
    except OSError:
        pass  # a cache that cannot be written or pruned: the next start derives again
