"""The sampler-row bound: seqs x (1 + spec) rows stay inside the sampler's exactness bound (pure).

spec is the draft tokens per step, given or read off the boot's ``sampler:`` line; a boot without
speculative decoding (no spec) has no rows to bound.
"""

from __future__ import annotations

from radiance_mcp.core.boot import Boot, Line
from radiance_mcp.core.constants import SAMPLER_ROW_BOUND
from radiance_mcp.core.rules.book import Check


def boot_spec(boot: Boot) -> tuple[int | None, Line | None]:
    """The draft tokens the boot's sampler line prints, with that line; (None, None) without one."""
    sampler = boot.first("sampler")
    if sampler is None or not sampler.fields.get("spec"):
        return None, None
    return int(sampler.number("spec", boot.where())), sampler.line


def max_seats(spec: int) -> int:
    """The most seats the bound allows at spec draft tokens."""
    return SAMPLER_ROW_BOUND // (1 + spec)


def within_bound(rows: int) -> bool:
    """The bound itself, on rows as planned or as a boot's sampler line prints them."""
    return rows <= SAMPLER_ROW_BOUND


def sampler_rows(seqs: int, spec: int | None, line: Line | None = None) -> Check:
    """seqs x (1 + spec) <= the bound; unchecked where there is no spec (no speculative decoding known)."""
    if spec is None:
        return Check("sampler_rows", "unchecked", f"{seqs} x (1 + spec): no spec given and no sampler line",
                     remedy="pass spec, or read a boot whose sampler line prints it")
    rows = seqs * (1 + spec)
    ok = within_bound(rows)
    return Check(
        "sampler_rows", "pass" if ok else "fail",
        f"{seqs} x (1 + {spec}) = {rows} rows {'<=' if ok else '>'} the {SAMPLER_ROW_BOUND}-row bound",
        (line,) if line else (),
        "" if ok else f"at spec {spec} at most {max_seats(spec)} seats; lower seqs or spec",
    )
