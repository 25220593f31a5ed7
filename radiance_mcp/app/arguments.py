"""A tool's raw arguments -> its input model, with errors an agent or a person can act on.

One path for MCP (server.py) and the CLI (cli.py). First every argument name is checked: an
unknown or misspelled name is refused with the closest valid one, because an agent's typo
(``reserve`` for ``reserves``) must never turn a gate into a pass by being dropped. Then the
input model validates, and each of pydantic's errors becomes one sentence: the argument, the
rule it breaks, and what to send instead, with no documentation links and no tool name
repeated. Bounds live in the input models (radiance_mcp.core.constants gives their reasons).
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from radiance_mcp.core.errors import InputError

M = TypeVar("M", bound=BaseModel)

MAX_ERRORS_SHOWN = 8
"""A hostile call can break every rule at once; the first few errors say enough."""
_NAME_SHOWN_CHARS = 64
_OUT_OF_RANGE = {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"}
_JSON_TYPE = {"int_type": "a JSON integer", "float_type": "a JSON number", "bool_type": "a JSON boolean"}
"""The strict types' errors: a string or boolean is not read as a number, nor a string as true."""


def parse_arguments(
    tool: str, model: type[M], raw: Mapping[str, Any], *, spell: Callable[[str], str] = str
) -> M:
    """Validate raw arguments into ``model``, or raise InputError saying what to send instead.

    ``spell`` shows a field name as the caller writes it (``--log-text`` on the CLI).
    """
    fields = list(model.model_fields)
    unknown = [name for name in raw if name not in model.model_fields]
    if unknown:
        raise InputError(unknown_names(tool, unknown, fields, spell), rule="argument_names")
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        raise InputError(describe_errors(exc, model, spell)) from exc


def unknown_names(tool: str, unknown: list[str], fields: list[str], spell: Callable[[str], str] = str) -> str:
    """Each unknown name with the closest valid one, and the valid names."""
    parts = [f"{tool} has no argument {_short_name(name, spell)}{_suggest(name, fields, spell)}"
             for name in unknown[:MAX_ERRORS_SHOWN]]
    if len(unknown) > MAX_ERRORS_SHOWN:
        parts.append(f"and {len(unknown) - MAX_ERRORS_SHOWN} more unknown names")
    listing = ", ".join(spell(f) for f in fields)
    return "; ".join(parts) + f". Nothing was run: call it again with only its arguments ({listing})."


def unknown_tool(name: str, tools: list[str]) -> str:
    """A tool name the server does not have, with the closest one and the list."""
    return (f"no tool {_short_name(name, str)}{_suggest(name, tools, str)}; the tools are {', '.join(tools)} "
            "(list_fleet first, to see the fleet)")


SAME_FIGURE = {
    "vram_kv_mib": ("pool_mib",), "pool_mib": ("vram_kv_mib",), "kv_pool_mib": ("pool_mib", "vram_kv_mib"),
    "vram_weights_mib": ("weights_mib",), "weights_mib": ("vram_weights_mib",),
    "max_num_seqs": ("seqs",), "num_seqs": ("seqs",), "context_len": ("max_model_len",),
    "max_context_len": ("max_model_len",), "ctx_size": ("max_model_len",), "spec_tokens": ("spec",),
}
"""A name one tool (or the engine's flag) gives a figure another tool names otherwise: check_pool_contract's
pool_mib is render_gates' vram_kv_mib (the engine's --vram-kv-mib). difflib finds no likeness between them."""


def _suggest(name: str, fields: list[str], spell: Callable[[str], str]) -> str:
    import difflib  # here: only a misspelled name loads it

    same = [f for f in SAME_FIGURE.get(str(name), ()) if f in fields]
    close = same or difflib.get_close_matches(str(name)[:_NAME_SHOWN_CHARS], fields, n=1, cutoff=0.6)
    return f" (did you mean {spell(close[0])!r}?)" if close else ""


def _short_name(name: str, spell: Callable[[str], str]) -> str:
    text = str(name)
    shown = spell(text[:_NAME_SHOWN_CHARS]) + ("..." if len(text) > _NAME_SHOWN_CHARS else "")
    return repr(shown)


# ---------------------------------------------------------------------------------------
# pydantic's errors, reworded


def describe_errors(exc: ValidationError, model: type[BaseModel], spell: Callable[[str], str] = str) -> str:
    """One sentence per error: the argument, the rule, the remedy."""
    errors = exc.errors(include_url=False)
    parts = [_describe(error, model, spell) for error in errors[:MAX_ERRORS_SHOWN]]
    if len(errors) > MAX_ERRORS_SHOWN:
        parts.append(f"and {len(errors) - MAX_ERRORS_SHOWN} more errors")
    return "; ".join(parts)


def _describe(error: ErrorDetails, model: type[BaseModel], spell: Callable[[str], str]) -> str:
    loc = error["loc"]
    kind = error["type"]
    message = error["msg"].removeprefix("Value error, ")
    if not loc:  # a rule across arguments (exactly one source...): our own sentence already
        return message
    name = _where(loc, spell)
    info = _walk(model, loc)[0]
    value = error.get("input")
    if kind == "missing":
        about = _about(info, loc).rstrip(".")
        return f"{name} is required" + (f" ({about[:1].lower()}{about[1:]})" if about else "")
    if kind == "extra_forbidden":
        known = _fields_of(model, loc[:-1])
        hint = _suggest(str(loc[-1]), known, str) if known else ""
        return f"{name} is not a field here{hint}; the fields are {', '.join(known)}"
    if kind in ("string_too_long", "too_long"):
        limit = (error.get("ctx") or {}).get("max_length")
        size = len(value) if isinstance(value, str | list | tuple | dict) else None
        unit = "characters" if kind == "string_too_long" else "items"
        got = f"{size:,} {unit}" if size is not None else "too long"
        return f"{name} is {got}, over its limit of {limit:,} {unit}; send a shorter one"
    if kind == "value_error":  # our own validators' sentences, which may name the argument already
        return message if message.startswith(str(loc[0])) else f"{name}: {message}"
    allowed = _allowed(info)
    if kind in _OUT_OF_RANGE and allowed:
        return f"{name}={_shown(value)} is out of range: send {allowed}"
    if kind in _JSON_TYPE:
        return f"{name}={_shown(value)}: {_sent(value)} is not read as {_JSON_TYPE[kind]} here; send {allowed}"
    about = _about(info, loc).rstrip(".")
    about = f" ({about[:1].lower()}{about[1:]})" if about else ""
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        fields = _fields_of(model, loc)
        shape = f" with the fields {', '.join(fields)}" if fields else ""
        return f"{name}={_shown(value)}: {_sent(value)} is not an object; send a JSON object{shape}"
    if kind == "list_type":
        return f"{name}={_shown(value)}: {_sent(value)} is not a list; send a JSON list{about}"
    if kind == "string_type":
        return f"{name}={_shown(value)}: {_sent(value)} is not text; send a JSON string{about}"
    if kind == "string_too_short":
        least = (error.get("ctx") or {}).get("min_length", 1)
        return f"{name}={_shown(value)} is too short; send at least {least} character(s){about}"
    rule = message[0].lower() + message[1:] if message else kind
    remedy = f"; send {allowed}" if allowed else ""
    return f"{name}={_shown(value)}: {rule}{remedy}"


def _sent(value: Any) -> str:
    """What a JSON value is, in the words of its type."""
    kinds = {bool: "a JSON boolean", str: "a string", int: "a number", float: "a number with a point or exponent",
             dict: "an object", list: "a list", type(None): "null"}
    return kinds.get(type(value), "that")


def _where(loc: tuple[int | str, ...], spell: Callable[[str], str]) -> str:
    head, *rest = loc
    return spell(str(head)) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest)


def _shown(value: Any) -> str:
    """A value as the caller sent it, kept short (a 10**100, a megabyte of text)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)  # as the caller wrote it: true, null
    if isinstance(value, int):
        if value.bit_length() > 64:  # str() of a 5,000-digit int raises; its size is what matters
            digits = math.floor(value.bit_length() * math.log10(2)) + 1
            digits -= abs(value) < 10 ** (digits - 1)
            return f"(a {'negative ' if value < 0 else ''}{digits:,}-digit number)"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:40]) + (f"... ({len(value):,} characters)" if len(value) > 40 else "")
    return f"(a {type(value).__name__})"


UNPUBLISHED_HELP = {
    "timeout_s": "the longest wait, in seconds, for each answer of the endpoint",
    "total_timeout_s": "the seconds the whole probe may take, every request included",
    "use_tokenize_endpoint": "count with the engine's tokenize endpoint where it has one (else from its refusals)",
    # The shared arguments, which the server's instructions word once for tools/list (app/server.py).
    "service": "a service list_fleet names",
    "log": "a ledger file under the log roots (on host, if given)",
    "log_text": "the ledger's text itself (unverified: no file backs it)",
    "host": "a fleet host of log or container (SSH)",
    "container": "a container on host whose podman logs are the ledger",
    "boot": "which boot of the ledger: -1 the newest, -2 the one before, 1 the oldest",
    "wait_s": "seconds to wait for a boot that settles (0: do not wait)",
    "after_line": "wait for a boot that starts past this line: the first_line of the boot being replaced",
    "after_byte": "wait for a boot that starts past this byte: the first_byte of the boot being replaced",
    "reserves": 'MiB held back below the ceiling, as a JSON list of {"mib", "label"} objects, each citing its '
                'reserve_candidates line ("line": N) or marked "personal": true; e.g. '
                '[{"mib": 256, "label": "safety", "personal": true}]',
    "reserves.mib": "MiB held back below the ceiling",
    "reserves.label": "what the reserve is for",
    "reserves.line": "its reserve_candidates line",
    "reserves.personal": "no line backs it: labelled personal",
    "outside_free": 'free memory read outside the engine, for a ledger that prints none, as a JSON list of {"mib", '
                    '"label", "card"} objects (card omitted: every card); e.g. [{"mib": 2048, "label": '
                    '"nvidia-smi 10:02", "card": 0}]',
    "outside_free.mib": "free MiB read outside the engine",
    "outside_free.label": "where it was read (e.g. 'nvidia-smi 10:02')",
    "outside_free.card": "its card; omitted: every card",
    "arms": 'as JSON, e.g. [{"value": 22208, "rate": 3397}, {"value": 24000, "rate": 3290}]',
    "claim_arms": "as JSON, e.g. [22208, 24000]",
    "dialect": "whose refusal wording to read: auto (detected from the first refusal) or an engine's",
    "api": "chat (thinking off) or completions",
    "model": "the served model's name to send in each request (omitted: none is sent, the engine serves its own)",
    "chars_per_token": "filler characters per token the prompts are built with",
    "max_window_tokens": "the largest window to try when the window is unknown; a refusal names it",
}
"""What the input fields whose model has no description mean, for the CLI's --help and the argument errors:
tools/list publishes every description on each turn of an agent, and these stay out of its budget
(tests/test_tools_list_size.py); a nested field is named by its list and its own name. A JSON field's entry here
is its shape and an example, said after its description if it has one."""


def field_help(name: str, info: FieldInfo) -> str:
    """An input field's help on the command line: its description, else UNPUBLISHED_HELP's (a JSON field's
    description and its shape), with its default where it has one and the text does not say it."""
    text = _unpublished(name)
    if info.description:
        listed = typing.get_origin(unwrap(info.annotation)) is list
        text = f"{info.description.rstrip('.')}: {text}" if text and listed else info.description
    default = None if info.is_required() else info.get_default(call_default_factory=True)
    if default is None or default == [] or "default" in text.lower() or "omitted" in text.lower():
        return text
    if isinstance(default, bool):
        shown = "on" if default else "off"
    else:
        shown = repr(default) if isinstance(default, str) else f"{default:g}" if isinstance(default, float) else (
            str(default))
    return f"{text} (default {shown})"


def _unpublished(name: str) -> str:
    side = name.removeprefix("proven_").removeprefix("candidate_")
    return UNPUBLISHED_HELP.get(name) or UNPUBLISHED_HELP.get(side, "")


def _about(info: FieldInfo | None, loc: tuple[int | str, ...] = ()) -> str:
    if info is not None and info.description:
        return info.description
    names = [str(part) for part in loc if isinstance(part, str)]
    if not names:
        return ""
    return UNPUBLISHED_HELP.get(".".join(names[-2:])) or _unpublished(names[-1])


def _allowed(info: FieldInfo | None) -> str:
    """'a whole number from 1 to 65,536' from the field's own bounds."""
    if info is None:
        return ""
    kind = unwrap(info.annotation)
    low = high = ""
    for bound in [*info.metadata, *_inner_metadata(info.annotation)]:
        if isinstance(bound, annotated_types.Ge):
            low = f"from {_number(bound.ge)}"
        elif isinstance(bound, annotated_types.Gt):
            low = f"above {_number(bound.gt)}"
        elif isinstance(bound, annotated_types.Le):
            high = f"to {_number(bound.le)}" if low.startswith("from") else f"at most {_number(bound.le)}"
        elif isinstance(bound, annotated_types.Lt):
            high = f"below {_number(bound.lt)}"
    if low.startswith("from") and high.startswith("at most"):
        high = "to" + high.removeprefix("at most")
    what = {int: "a whole number", float: "a finite number", bool: "true or false (a JSON boolean)"}.get(kind)
    if what is None:
        if typing.get_origin(kind) is typing.Literal:
            return "one of " + ", ".join(repr(a) for a in typing.get_args(kind))
        return ""
    joiner = " and " if low.startswith("above") and high else " "
    return " ".join(p for p in (what, joiner.join(p for p in (low, high) if p)) if p)


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def unwrap(annotation: Any) -> Any:
    """X | None -> X; Annotated[X, ...] -> X."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            annotation = rest[0]
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _inner_metadata(annotation: Any) -> list[Any]:
    """The bounds of an Annotated type inside X | None (pydantic keeps them there)."""
    for arm in typing.get_args(annotation) or (annotation,):
        if typing.get_origin(arm) is typing.Annotated:
            found: list[Any] = []
            for item in typing.get_args(arm)[1:]:
                found.extend(item.metadata if isinstance(item, FieldInfo) else [item])
            return found
    return []


def _walk(model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[FieldInfo | None, Any]:
    """The last field on the way to a location (through lists and nested models), and the type there."""
    current: Any = model
    info: FieldInfo | None = None
    for part in loc:
        target = unwrap(current)
        if isinstance(part, int):
            current = (typing.get_args(target) or (None,))[0]
        elif isinstance(target, type) and issubclass(target, BaseModel) and part in target.model_fields:
            info = target.model_fields[part]
            current = info.annotation
        else:
            return None, None
    return info, current


def _fields_of(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    target = unwrap(_walk(model, loc)[1])
    return list(target.model_fields) if isinstance(target, type) and issubclass(target, BaseModel) else []
