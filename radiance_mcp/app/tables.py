"""A tool's answer for people (the CLI without --json): aligned 'key  value' lines, lists of records as tables.

Every line fits width() columns (the COLUMNS environment variable, else the terminal's, else 120): a long value
wraps under itself, a table too wide for its columns wraps its cells, and one too wide even so prints each record as
'field  value' lines. A nested model in a cell is its fields, one a line (a figure as '8,300.36 MiB (line 3)'), never
JSON; None is '-' (a nested model leaves it out), True and False 'yes' and 'no', a whole number (a count) without
decimals ('4 seats', not '4.00'), any other to two (core.units.fmt_mib); a file's text (a value of several lines) is
a block of its own lines under its name. A sentence is printed once: one every row of a table repeats, or every row
ends with, goes under the table; a ledger line quoted in several rows is quoted in the first and named by its number
after (one past QUOTED characters is cut); keys citing the same line share its row; a long text printed in one field
is named, not repeated, in a later note or table cell that holds it (a path is printed where it stands, so a command
holding it can be copied). An error on a terminal is wrapped too (said())."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

from pydantic import BaseModel

from radiance_mcp.core.units import fmt_mib
from radiance_mcp.models.base import LineRef

COLUMNS = 120
"""The width of a line when the COLUMNS environment variable does not set one."""
GAP = "  "
INDENT = "  "
NARROWEST = 8
"""A wrapped column keeps at least this many characters (or its natural width, if less) and its longest word
whole; a table whose columns cannot all keep theirs is printed one record at a time."""
SENTENCE = 24
"""A value every row repeats (or ends with) is printed once under its table when it is at least this long and has
a space."""
QUOTE = re.compile(r"\bline (\d+): ")
"""Where a cell quotes a ledger line ('line 27: W card 0 settled at ...'): the quote runs to the end of its
parenthesis or of the cell."""
QUOTED = 480
"""A quoted ledger line past this many characters (SGLang's server_args line runs to 6,000) is cut at a word
and says how much is left out: the figures read from it are in their own rows, and --json quotes it whole."""
REPEATED = 80
"""A text at least this long printed in one field is named, not printed again, in a later list or value that
holds it whole ('the ceiling was not checked: (see checks above)')."""
SEPARATORS = ("; ", ": ")
"""Where a sentence every row ends with may begin: after a clause."""


def width() -> int:
    """The terminal's columns: COLUMNS when it is set to a whole number of at least 40, else the columns of the
    terminal stdout is (40 at least), else (stdout piped) 120."""
    value = os.environ.get("COLUMNS", "")
    if value.isdigit() and int(value) >= 40:
        return int(value)
    try:
        return max(os.get_terminal_size(sys.__stdout__.fileno()).columns, 40) if sys.__stdout__ else COLUMNS
    except (OSError, ValueError):  # not a terminal, or closed
        return COLUMNS


def said(message: str, stream: TextIO) -> str:
    """An error or a refusal as stream shows it: on a terminal wrapped within width(), its lines after the first
    indented; piped (a log, grep), one line, whole."""
    return "\n".join(wrap(message, width(), indent="  ")) if stream.isatty() else message


class _Wrapper(textwrap.TextWrapper):
    """textwrap's, but a word too long for a line (a path, a URL) breaks after a '/' where it has one."""

    def _split(self, text: str) -> list[str]:
        return [part for chunk in super()._split(text)
                for part in (re.findall(r"[^/]*/+|[^/]+$", chunk) if len(chunk) > self.width else [chunk])]


def wrap(text: str, columns: int, indent: str = "") -> list[str]:
    """text in lines of at most columns characters (words kept whole where they fit, paths unbroken at '-' and
    broken after a '/' when too long for a line), each line after the first led by indent; its own line breaks
    kept; one empty line for an empty text."""
    wrapper = _Wrapper(max(columns, len(indent) + 1), subsequent_indent=indent, break_on_hyphens=False)
    return [part for line in text.splitlines() or [""] for part in wrapper.wrap(line) or [""]]


def render(model: BaseModel, columns: int | None = None) -> str:
    """A tool output as aligned 'key  value' lines, lists of records as tables, every line within columns
    (width() when not given)."""
    columns = width() if columns is None else columns
    lines: list[str] = []
    scalars: list[tuple[str, str]] = []
    seen = {value: name for name, value in model if _repeatable(value)}
    # each long text printed above: the field it was printed under (the scalars' lines come first)
    for name, value in model:
        if isinstance(value, str) and "\n" in value:  # a file's text: a block of its own lines, the most room
            lines += ["", f"{name}:", *(line for text in value.splitlines()
                                        for line in _indented(wrap(text, columns - len(INDENT), indent="    ")))]
        elif isinstance(value, BaseModel) and not _figure(value):
            lines += ["", f"{name}:", *_indented(render(value, columns - len(INDENT)).splitlines())]
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            lines += ["", f"{name}:", *_indented(table(value, columns - len(INDENT), seen))]
        elif isinstance(value, dict) and value:
            shown: dict[str, list[str]] = {}  # the keys citing one line share its row
            for key, item in value.items():  # a ledger line (a LineRef, or the text of lines' number) quoted
                shown.setdefault(f"line {item.line}: {_quote(item.text)}" if isinstance(item, LineRef) else
                                 _quote(item) if name == "lines" else _cell(item),
                                 []).append(f"line {key}" if name == "lines" else str(key))
            pairs = [(", ".join(keys), text) for text, keys in shown.items()]
            lines += ["", f"{name}:", *_indented(_pairs(pairs, columns - len(INDENT)))]
        elif isinstance(value, list):
            if value:
                lines += ["", f"{name}:"]
                lines += [line for item in value for line in _indented(
                    wrap(f"- {_once(_cell(item), seen)}", columns - len(INDENT), indent="  "))]
        else:
            scalars.append((name, _cell(value)))
        seen.update((text, name) for text in _texts(value) if _repeatable(text) and text not in seen)
    return "\n".join(_pairs(scalars, columns) + lines).strip("\n")


def table(rows: Sequence[BaseModel], columns: int, seen: dict[str, str] | None = None) -> list[str]:
    """Records as a table within columns: a column of one long sentence in every row printed once below it, the
    columns that are '-' in every row named once below it, a long text printed above (seen: the field it was
    printed under) named instead;
    cells wrapped when the columns do not fit, each record as 'field  value' lines when even wrapped a column
    cannot keep NARROWEST characters and its longest word. A list of names ('lowpool card 0') is a cell; fields
    that hold records, sentences or mappings are left out."""
    heads = [name for name, value in rows[0] if not isinstance(value, dict) and not (
        isinstance(value, list) and not all(_names(getattr(row, name)) for row in rows))]
    cells = [[_quote(row.text) if isinstance(row, LineRef) and head == "text" else
              _said_above(_cell(getattr(row, head)), seen or {}) for head in heads] for row in rows]
    shared = [i for i in range(len(heads)) if len(rows) > 1 and len({row[i] for row in cells}) == 1
              and len(cells[0][i]) >= SENTENCE and " " in cells[0][i]]
    below = [(f"{heads[i]} (every row)", cells[0][i]) for i in shared]
    empty = [i for i in range(len(heads)) if len(rows) > 1 and all(row[i] == "-" for row in cells)]
    below += [("empty in every row", ", ".join(heads[i] for i in empty))] if empty else []
    shared += empty
    heads = [head for i, head in enumerate(heads) if i not in shared]
    cells = [[cell for i, cell in enumerate(row) if i not in shared] for row in cells]
    columns_of = [_quoted_once([row[i] for row in cells]) for i in range(len(heads))]
    for i, head in enumerate(heads):
        ending = _shared_ending(columns_of[i])
        if ending:
            columns_of[i] = [cell[: len(cell) - len(ending)].rstrip(":; ") + ": ..." for cell in columns_of[i]]
            below.append((f"{head} (every row's ...)", ending))
    cells = [list(row) for row in zip(*columns_of, strict=True)] if heads else cells
    texts = [[_head_parts(head), *(row[i] for row in cells)] for i, head in enumerate(heads)]
    words = [max(len(word) + 1 for text in column for word in text.split() or [""]) for column in texts]
    content = [max(w - 1, *(len(line) for text in column[1:] for line in text.splitlines() or [""]))
               for w, column in zip(words, texts, strict=True)]  # the cells' lines, a head's longest part
    natural = [max(len(head), n) for head, n in zip(heads, content, strict=True)]
    widths = _fit(natural, content, words, columns - len(GAP) * (len(heads) - 1))
    if widths is None:
        out = [line for k, row in enumerate(cells)
               for line in [*([""] if k else []), *_pairs(list(zip(heads, row, strict=True)), columns)]]
    else:
        out = _grid(heads, cells, widths)
    return out + (["", *_pairs(below, columns)] if below else [])


def _quote(text: str) -> str:
    """A ledger line as quoted in a table: whole up to QUOTED characters, else cut at a word, naming the rest."""
    if len(text) <= QUOTED:
        return text
    kept = text[:QUOTED].rsplit(" ", 1)[0]
    return f"{kept} ... ({len(text) - len(kept):,} characters more: --json quotes the line whole)"


def _texts(value: Any) -> list[str]:
    """The texts a field's value holds, in its models and lists."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, BaseModel):
        return [text for _, item in value for text in _texts(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _texts(item)]
    return []


def _repeatable(value: Any) -> bool:
    """A text long enough to be named, not printed again, when a later field holds it: a sentence (a path or a
    name is printed where it stands: a command that holds it can be copied)."""
    return isinstance(value, str) and len(value) >= REPEATED and " " in value


def _once(text: str, seen: dict[str, str]) -> str:
    """text with a long text printed above under another field named instead of printed again."""
    for earlier, name in seen.items():
        if earlier in text:
            text = text.replace(earlier, f"(see {name} above)")
    return text


def _said_above(cell: str, seen: dict[str, str]) -> str:
    """A table's cell that is a long text printed above, whole or clipped (its beginning and '...'), named by the
    field it was printed under (a refused boot's reason under unreadable, then in problems)."""
    if not _repeatable(cell):
        return cell
    for earlier, name in seen.items():
        if cell == earlier or (cell.endswith("...") and earlier.startswith(cell[:-3])):
            return f"(see {name} above)"
    return cell


def _names(value: list[Any]) -> bool:
    """Whether a list holds names only (texts of no clauses: 'twin', 'lowpool card 0'), which a cell can list."""
    return all(isinstance(item, str) and not any(mark in item for mark in (*SEPARATORS, ", ")) for item in value)


def _quoted_once(column: list[str]) -> list[str]:
    """The cells of a column, each ledger line quoted in the first cell that quotes it and named by its number
    ('line 27, as above') in the later ones."""
    seen: set[str] = set()
    out = []
    for cell in column:
        kept, start = [], 0
        for found in QUOTE.finditer(cell):
            if found.start() < start:
                continue
            end = _quote_end(cell, found.end())
            if cell[found.start():end] in seen:
                kept.append(f"{cell[start:found.start()]}line {found[1]}, as above")
                start = end
            else:
                seen.add(cell[found.start():end])
        out.append("".join(kept) + cell[start:])
    return out


def _quote_end(cell: str, start: int) -> int:
    """Where a quote beginning at start ends: at the parenthesis it stands in, or at the end of the cell."""
    depth = 0
    for i in range(start, len(cell)):
        depth += {"(": 1, ")": -1}.get(cell[i], 0)
        if depth < 0:
            return i
    return len(cell)


def _shared_ending(column: list[str]) -> str:
    """The longest sentence (SENTENCE long at least, on one line, begun after a clause) every cell of a column
    of several rows ends with, when the cells differ before it; else ''."""
    if len(column) < 2 or len(set(column)) == 1:
        return ""
    first = column[0]
    for i in range(len(first)):
        if first.startswith(SEPARATORS, i):
            ending = first[i + 2:]
            if len(ending) >= SENTENCE and " " in ending and "\n" not in ending and all(
                    cell.endswith(ending) and len(cell) > len(ending) + 2 for cell in column):
                return ending
    return ""


def _head_parts(head: str) -> str:
    """A head as the words it may wrap into: 'candidate_line' as 'candidate_ line' (after each underscore)."""
    return head.replace("_", "_ ")


def _fit(natural: list[int], content: list[int], words: list[int], room: int) -> list[int] | None:
    """Each column's width within room: its natural width (head and cells) when all fit, else the room shared
    out evenly among the columns narrower than their cells (the widest first), then than their heads; None when
    the columns cannot each keep NARROWEST and their longest word (a path, a URL, a head's part) whole."""
    if sum(natural) <= room:
        return natural
    widths = [min(n, max(w, NARROWEST)) for n, w in zip(content, words, strict=True)]
    if sum(widths) > room:
        return None
    for target in (content, natural):
        while (extra := room - sum(widths)) > 0 and (wanting := sorted(
                (j for j in range(len(target)) if target[j] > widths[j]), key=lambda j: widths[j] - target[j])):
            share = max(extra // len(wanting), 1)
            for j in wanting[:extra]:
                widths[j] = min(target[j], widths[j] + share)
    return widths


def _grid(heads: list[str], cells: list[list[str]], widths: list[int]) -> list[str]:
    def line(parts: Sequence[str]) -> str:
        return GAP.join(part.ljust(w) for part, w in zip(parts, widths, strict=True)).rstrip()

    parts = [[part.replace("_ ", "_") for part in wrap(_head_parts(head), w)] if len(head) > w else [head]
             for head, w in zip(heads, widths, strict=True)]  # a head too long wraps after an underscore
    out = [line([part[k] if k < len(part) else "" for part in parts]) for k in range(max(map(len, parts)))]
    for row in cells:
        wrapped = [wrap(cell, w, indent=" ") for cell, w in zip(row, widths, strict=True)]
        out += [line([part[k] if k < len(part) else "" for part in wrapped])
                for k in range(max(len(part) for part in wrapped))]
    return out


def _pairs(pairs: Sequence[tuple[str, str]], columns: int) -> list[str]:
    """'key  value' lines, the values aligned and wrapped under themselves within columns."""
    key = min(max((len(k) for k, _ in pairs), default=0), columns // 3)
    out = []
    for name, value in pairs:
        lead = f"{name:<{key}}{GAP}"
        if len(lead) > key + len(GAP):  # a key longer than the key column: its value on the lines below
            out.append(name)
            lead = " " * (key + len(GAP))
        text = wrap(value, columns - key - len(GAP))
        out += [(lead if k == 0 else " " * len(lead)) + part for k, part in enumerate(text)]
    return [line.rstrip() for line in out]


def _indented(lines: list[str]) -> list[str]:
    return [INDENT + line if line else line for line in lines]


def _figure(value: BaseModel) -> bool:
    """A figure (a value in a unit, with its line): one cell, not a block of its fields."""
    return {"value", "unit"} <= set(type(value).model_fields)


def _cell(value: Any) -> str:
    """A value as text: None '-', a number with thousands separators, a figure as printed and its line, a
    ledger line by its number, any other model its fields one a line ('name: value', None left out)."""
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "\n".join(f"{key}: {_cell(item)}" for key, item in value.items())
    if isinstance(value, BaseModel):
        data = dict(value)
        if _figure(value):
            shown = data.get("printed") or f"{fmt_mib(data['value'], 2)} {data['unit']}"
            where = list(dict.fromkeys(str(getattr(ref, "line", ref)) for ref in data.get("lines", []))) or (
                [str(data["line"])] if data.get("line") is not None else [])
            source = f"line {', '.join(where)}" if where else data.get("source")
            return f"{shown} ({source})" if source else shown
        if isinstance(value, LineRef):
            return f"line {value.line}"
        return "\n".join(f"{name}: {_cell(item)}" for name, item in data.items()
                         if item is not None and item != [] and item != {})
    if isinstance(value, list):
        return ", ".join(_cell(item) for item in value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt_mib(value, 2)
    return str(value)


# ---------------------------------------------------------------------------------------
# plan_free_vram: one service's plan, as a person reads it


class _CardRow(BaseModel):
    card: int
    physical: str | None
    ceiling_mib: int
    headroom_mib: int
    headroom_once_mib: int
    shared_with: str
    derivation: str


class _ServiceRow(BaseModel):
    service: str
    host: str | None
    headroom_mib: int
    usable_mib: int
    options: str


class _BestRow(BaseModel):
    by: str
    service: str
    option: str
    adds_mib: int
    after: str
    gain: str


class _FigureRow(BaseModel):
    figure: str
    value: str
    now: str
    how: str


def render_plan(model: BaseModel, columns: int | None = None) -> str:
    """plan_free_vram's answer: the whole fleet's as render() prints it; a service's plan with its cards (the
    binding card's figures under them), each option's flags, gains, takes and plans, its checks, and each
    ledger line it cites quoted once, in its lines."""
    from radiance_mcp.models.plan import MEASURE_UNITS, SHARING, PlanFreeVramOutput

    assert isinstance(model, PlanFreeVramOutput)
    columns = width() if columns is None else columns
    # What sharing's word means, said where it is printed (once: the whole fleet's summary says it); best's figures
    # in their unit.
    legend = f"{model.sharing}: {SHARING[model.sharing]}"
    legend = model.sharing if any(SHARING[model.sharing] in line for line in model.summary) else legend
    best = [_BestRow(by=b.by, service=b.service, option=b.option, adds_mib=b.adds_mib, after=_counted(
        b.value, MEASURE_UNITS[b.by]), gain=f"+{fmt_mib(b.gain, 2)}") for b in model.best]
    rows = [_ServiceRow(**dict(row, options="\n".join(row.options))) for row in model.rows]  # an option a line
    head = render(model.model_copy(update={"services": [], "sharing": legend, "best": best, "rows": rows}), columns)
    if not model.services:
        return head
    return "\n\n".join([head, *("\n".join(_plan_lines(plan, columns)) for plan in model.services)])


def _plan_lines(plan: Any, columns: int) -> list[str]:
    """One ServicePlan: its scalars, cards, options, checks and lines (render() for the parts it prints well)."""
    inner = columns - len(INDENT)
    ledger = plan.ledger
    boots = f" of {ledger.boots_seen}" if ledger.boots_seen else ""
    scalars = [
        ("ledger", f"{ledger.source}, boot {ledger.boot}{boots}, lines {ledger.first_line}-{ledger.last_line} "
                   f"({ledger.origin}{', verified' if ledger.verified else ''})"),
        ("model", plan.model), ("kv_cache_dtype", plan.kv_cache_dtype or "-"),
        ("shape", "; ".join(f"{f.name} {_traced(f)}" for f in plan.shape) or "-"),
        ("binding_card", str(plan.binding_card)), ("headroom_mib", _cell(plan.headroom_mib)),
        ("usable_mib", _cell(plan.usable_mib) + (f" (reserves: {', '.join(r.label for r in plan.reserves)})"
                                                 if plan.reserves else "")),
        ("slope", _traced(plan.slope)), ("slab", _traced(plan.slab)), ("sharing", plan.sharing),
        ("plan_rules", ", ".join(plan.plan_rules) or "-"),
    ]
    out = [f"plan of {plan.service or ledger.source}:", *_indented(_pairs(scalars, inner))]
    out += ["", f"{INDENT}notes:", *(line for note in plan.notes for line in _indented(_indented(
        wrap(f"- {note}", inner - len(INDENT), indent="  "))))] if plan.notes else []
    rows = [_CardRow(card=c.card, physical=c.physical, ceiling_mib=c.ceiling_mib, headroom_mib=c.headroom_mib,
                     headroom_once_mib=c.headroom_once_mib, shared_with=", ".join(c.shared_with) or "-",
                     derivation=c.derivation) for c in plan.cards]
    binding = next(c for c in plan.cards if c.card == plan.binding_card)
    figures = [(f"card {binding.card} {name}", _traced(getattr(binding, name)))
               for name in ("vram_weights", "vram_kv", "engine_floor", "settled_free")]
    out += ["", f"{INDENT}cards:", *_indented(_indented(table(rows, inner - len(INDENT)))), "",
            *_indented(_indented(_pairs(figures, inner - len(INDENT))))]
    for option in plan.options:
        out += ["", *_indented(_option_lines(option, inner))]
    if plan.checks:
        checks = [_FigureRow(figure=c.rule, value=c.verdict, now=", ".join(map(str, c.lines)) or "-",
                             how=c.arithmetic + (f"; {c.remedy}" if c.remedy else "")) for c in plan.checks]
        out += ["", f"{INDENT}checks (rule, verdict, lines, arithmetic):",
                *_indented(_indented(table(checks, inner - len(INDENT))[1:]))]
    out += ["", f"{INDENT}lines:", *_indented(_indented(_pairs([(f"line {n}", text) for n, text in plan.lines.items()],
                                                               inner - len(INDENT))))]
    return out


def _option_lines(option: Any, columns: int) -> list[str]:
    """An option: what it adds and moves, its flags, gains and takes (each with its arithmetic), its plans."""
    inner = columns - len(INDENT)
    out = wrap(f"option {option.name}: +{option.adds_mib:,} MiB, {option.axis}", columns, indent=INDENT)
    out += _indented(_pairs([("flags", "; ".join(option.flags) or "-")], inner))
    figures = [_FigureRow(figure=f"{kind}: {f.name}", value=_figure_value(f),
                          now="-" if f.now is None else _figure_value(f, f.now), how=f.text or f"line {f.line}")
               for kind, items in (("gains", option.gains), ("takes", option.takes)) for f in items]
    out += _indented(table(figures, inner)) if figures else []
    out += ["", *_indented(table(option.plans, inner))] if option.plans else []
    out += [line for note in option.notes for line in _indented(wrap(f"- {note}", inner, indent="  "))]
    return out


def _figure_value(figure: Any, value: float | None = None) -> str:
    """A traced figure's value (or its now) in its unit: '4 seats', '1 seat'."""
    value = figure.value if value is None else value
    return _counted(value, figure.unit)


def _counted(value: float, unit: str) -> str:
    """value in unit, a unit of things ('seats', 'tokens') singular for one: '1 seat', '2 seats', '4.50 MiB'."""
    return f"{fmt_mib(value, 2)} {unit[:-1] if value == 1 and unit.isalpha() and unit.endswith('s') else unit}"


def _traced(figure: Any) -> str:
    """A traced figure in a cell: '24,000 MiB (line 9)', or its arithmetic or constant in the parenthesis."""
    if figure is None:
        return "-"
    if figure.line is not None:
        return f"{_figure_value(figure)} (line {figure.line})"
    return f"{_figure_value(figure)} ({figure.text or figure.source})"
