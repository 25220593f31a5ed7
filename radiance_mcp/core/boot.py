"""The records every engine's boot ledger is read into: one of each, for radiance, vLLM, SGLang and llama.cpp.

Pure: no I/O. A ``Line`` is one line of a log as read; a ``Figure`` is a number with its unit and
the lines it comes from (read off one line, or derived from several with the arithmetic written
out); ``Missing`` names a figure the procedure needs that the boot did not print, and how to get
it; a ``Refusal`` is a line where the engine refused to start or to serve.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from radiance_mcp.core.units import Size


@dataclass(frozen=True)
class Line:
    number: int
    """1-based line number in the source."""
    text: str
    """The line as read, ANSI codes and line end removed."""


@dataclass(frozen=True)
class Figure:
    """A figure and where it comes from: read off one line, or derived from the lines named."""

    value: Decimal
    unit: str
    """``MiB``, ``tokens``, ``B/token``, ``sequences``, ``slots`` or ``fraction``."""
    lines: tuple[Line, ...]
    resolution: Decimal = Decimal(0)
    """The printed figure is known to +- resolution / 2 (0 for counts and echoed flags)."""
    arithmetic: str = ""
    """Empty for a figure read off its line; the sum for a derived one."""
    printed: str = ""
    """The figure as the line prints it ('2.01 GiB'), where that is kept; empty for a derived one."""

    @classmethod
    def of_size(cls, size: Size, line: Line) -> Figure:
        """A size read off one line: exact MiB of the printed figure, and its resolution."""
        return cls(size.mib, "MiB", (line,), size.resolution_mib, printed=size.text)

    @property
    def line(self) -> Line:
        """The line the figure was read off (the first, for a derived one)."""
        return self.lines[0]

    @property
    def count(self) -> int:
        """The figure as a whole number: tokens, sequences or slots (a fraction of a sequence is cut)."""
        return int(self.value)

    def agrees_with(self, other: Decimal) -> bool:
        """True when other rounds to the printed figure (within half its last digit)."""
        return abs(self.value - other) <= self.resolution / 2

    def cite(self, source: str) -> str:
        """``source:line: 'text'``, the line the figure was read off."""
        return f"{source}:{self.line.number}: {self.line.text.strip()!r}"


@dataclass(frozen=True)
class Missing:
    """A figure the procedure needs that this boot's log does not print."""

    figure: str
    printed_in: str
    """The line the engine prints it in."""
    remedy: str
    """How to get it: the flag, the log level, or the other figure to supply."""

    def __str__(self) -> str:
        return f"{self.figure}: not printed (the engine prints it as {self.printed_in}); {self.remedy}"


RefusalKind = Literal["window_exceeds_kv", "pool_below_window", "not_enough_memory", "allocation_failed"]


@dataclass(frozen=True)
class Refusal:
    """A line where the engine refused to start or to serve, with what it refused."""

    kind: RefusalKind
    line: Line
    detail: str
    """What was refused, with the figures of the line, and the flag that changes it."""
    final: bool = True
    """False where the engine recovered (llama.cpp retrying without pipeline parallelism)."""
