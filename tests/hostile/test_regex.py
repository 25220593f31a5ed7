"""Issue 10, defect 1: every phrase pattern matches in time linear in the line.

Also the other patterns a caller or a peer chooses the text of: sizes and --*-mib flags on a
line a reserve cites, a serve script's check, an engine's refusal body.

The `sampler:` and `full-length sessions` patterns took quadratic time on long digit runs:
16,000 digits cost 10 s, 65,000 digits 170 s, inside the 64 KiB line cap. A line built from a
pattern's own alphabet (digits, separators, units, the phrase's own words, repeated up to the
cap) must cost about a scan of the line.

The one timed test of this issue (its brief asks for it): the bound is relative to a Python
loop over a line of the same length and kind, timed in the same process, and generous (a linear pattern costs under 30
such loops on a 64 KiB line, a quadratic one thousands), and a slow run is retried. Both are
timed by the CPU time of the test's own thread (time.thread_time), not the wall clock: on a busy
shared machine a 0.2 s match is taken off the core now and then where a 1 ms yardstick is not,
and the wall clock counted those pauses against the pattern.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.core.audit import serve_script
from radiance_mcp.core.boot import Boot, Line
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.ledger import MAX_LINE_BYTES, PHRASES, read_text
from radiance_mcp.core.rules import capacity
from radiance_mcp.core.wording import refusals as dialects

DIGITS = ["1", "7", "123", "0", "9999"]
SEPARATORS = [",", ".", " ", "  ", "\t", ":", "%", "(", ")", "=", "+", "x", "-", "--", "/", "'"]
UNITS = ["B", "KiB", "MiB", "GiB", "TiB"]
SCAN_FACTOR = 200
"""A match may cost this many Python loops over the same line (linear: under 30; quadratic: over 10,000)."""


def _words(template: str) -> list[str]:
    return re.sub(r"\{[^}]*\}", " ", template).split()


_SCANS_S: dict[tuple[int, bool], float] = {}


def _scan_s(line: str) -> float:
    """The cost of one Python loop over the line: the linear yardstick (best of five).

    A loop over a string costs the same for any string of its length and kind (every line here is
    ASCII and MAX_LINE_BYTES long), so it is timed once per length and kind in this process, not per
    example: timed per example, best of three, it cost 80 times the matches it measured.
    """
    key = (len(line), line.isascii())
    if key not in _SCANS_S:
        best = float("inf")
        for _ in range(5):
            start = time.thread_time()
            count = 0
            for _char in line:
                count += 1
            best = min(best, time.thread_time() - start)
        _SCANS_S[key] = best
    return _SCANS_S[key]


def _best_s(run: Callable[[str], object], text: str, enough_s: float = 0.0, tries: int = 3) -> float:
    """The best of `tries` timed runs, stopping at one under enough_s (a busy machine slows a run now and then)."""
    best = float("inf")
    for _ in range(tries):
        start = time.thread_time()
        run(text)
        best = min(best, time.thread_time() - start)
        if best <= enough_s:
            break
    return best


def assert_linear(run: Callable[[str], object], line: str, what: str, *, per_step: bool = False) -> None:
    """run(line) costs at most SCAN_FACTOR scans of the line (best of three runs).

    per_step: run does Python work per token (a tokenizer), so a scan is no yardstick: the
    line may cost at most 8 times its first quarter more (linear: 4 times; quadratic: 16).
    That quarter is timed only when a first run is over the scan bound alone (most are under
    it), and the runs stay three in all: the same verdict as timing the quarter first.
    """
    bound_s = SCAN_FACTOR * _scan_s(line)
    took_s = _best_s(run, line, bound_s, tries=1 if per_step else 3)
    if per_step and took_s > bound_s:
        bound_s += 8 * _best_s(run, line[: len(line) // 4])
        took_s = min(took_s, _best_s(run, line, bound_s, tries=2))
    assert took_s <= bound_s, (
        f"{what} took {took_s:.3f} s on a {len(line):,}-character line {line[:80]!r}...; bound {bound_s:.3f} s"
    )


Recipe = tuple[str, str, str]


def recipes(alphabet: list[str]) -> st.SearchStrategy[Recipe]:
    """(head, body, tail) from the alphabet; the line is built in the test (a short repr on failure)."""
    token = st.sampled_from(alphabet)
    return st.sampled_from(["", " "]).flatmap(lambda glue: st.tuples(
        st.lists(token, max_size=6).map(glue.join),
        st.lists(token, min_size=1, max_size=4).map(lambda words: glue.join(words) + glue),
        st.lists(token, max_size=6).map(glue.join),
    ))


def line_of(recipe: Recipe) -> str:
    """Exactly MAX_LINE_BYTES: the head, the body repeated to fill the cap, the tail."""
    head, body, tail = recipe
    room = MAX_LINE_BYTES - len(head) - len(tail)
    return head + (body * (room // len(body) + 1))[:room] + tail


HOSTILE = settings(max_examples=20, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.slow
@pytest.mark.parametrize("key", list(PHRASES))
@HOSTILE
@given(data=st.data())
def test_phrase_matches_in_linear_time(key: str, data: st.DataObject) -> None:
    phrase = PHRASES[key]
    alphabet = [*DIGITS, *SEPARATORS, *UNITS, phrase.keyword, *_words(phrase.template)]
    assert_linear(phrase.pattern.search, line_of(data.draw(recipes(alphabet))), f"phrase {key!r}")


def _dialect_patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for name, value in vars(dialects).items():
        values = value if isinstance(value, tuple) else (value,)
        for number, item in enumerate(values):
            pattern = item[0] if isinstance(item, tuple) else item
            if isinstance(pattern, re.Pattern):
                found[f"{name}[{number}]"] = pattern
    return found


DIALECTS = _dialect_patterns()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DIALECTS))
@HOSTILE
@given(data=st.data())
def test_refusal_pattern_matches_in_linear_time(name: str, data: st.DataObject) -> None:
    """An engine's refusal body is read with these; a hostile endpoint chooses the body."""
    pattern = DIALECTS[name]
    alphabet = [*DIGITS, *SEPARATORS, *re.findall(r"[A-Za-z_`']+", pattern.pattern)]
    assert_linear(pattern.search, line_of(data.draw(recipes(alphabet))), f"refusal pattern {name}")


# The other patterns a caller's text reaches: sizes and --*-mib flags on a cited line
# (compute_ceiling's reserves), and a serve script's references and fallbacks.
SCRIPT_ALPHABET = ["$", "${", "}", "{", "a", "RX_MAX_SEQS", ":-", "-", "=", "8", "--max-num-seqs", "--", " ", "\n",
                   '"', "'", "(", ")", ";", "case", "esac", "in", "|", "\\", "$(", "`", "#", "<<", "EOF", "EXTRA="]


@HOSTILE
@given(recipe=recipes([*DIGITS, *SEPARATORS, *UNITS, "--vram-kv-mib", "-mib", "a", "I"]))
def test_sizes_on_a_cited_line_in_linear_time(recipe: Recipe) -> None:
    no_hits = Boot("hostile", 1, 1, 1, 1, ())  # the sizes no phrase names: every size on the line is scanned
    # Python work per size found (parse_size): a line of 32,768 sizes ('1B1B...') costs about 160 scans on an
    # idle machine, near the scan bound alone; per step, it is held to 8 times its first quarter more.
    assert_linear(lambda text: capacity._figures_on(no_hits, Line(1, text)), line_of(recipe), "sizes on a line",
                  per_step=True)


@pytest.mark.slow
@HOSTILE
@given(recipe=recipes(SCRIPT_ALPHABET))
def test_serve_script_check_in_linear_time(recipe: Recipe) -> None:
    def check(text: str) -> None:
        try:  # radiance named: its flags are traced whether or not the text names its launcher
            serve_script.check_script(text, (), engine="radiance")
        except InputError:
            pass  # nested too deep, or nothing of radiance in it: refused, which is an answer

    assert_linear(check, line_of(recipe), "check_script", per_step=True)


# ---------------------------------------------------------------------------------------
# The lines of the issue (plain: each must simply come back, and the boot's own lines still read)


@pytest.mark.parametrize("digits", [16_000, 65_000])
def test_long_digit_runs_of_the_issue(digits: int, boot_text: Callable[..., str]) -> None:
    run = "4" * digits
    hostile = [
        f"I sampler: {run}",
        f"I sampler: 2 seqs x (1 + 3 spec) = {run}",
        f"E kv cache 1 MiB (fp8): {run} full-length sessions",
        f"E kv cache 271.25 MiB (fp8): 0% backing of the {run} x 1 worst case: 0 full-length sessions",
    ]
    assert all(len(line) <= MAX_LINE_BYTES for line in hostile)
    boot = read_text(boot_text(filler=hostile), source="log_text")
    assert [hit.fields["rows"] for hit in boot.all("sampler")] == ["8"]  # the boot's own 2 x (1 + 3) = 8
    assert [(hit.fields["seqs"], hit.fields["tokens"]) for hit in boot.all("kv_backing")] == [
        ("2", "200000"),  # the boot's own line
        (run, "1"),  # the last hostile line has the phrase's shape: read, and its figure refused when used
    ]


@pytest.mark.parametrize(
    ("script", "line"),
    [
        ('#!/bin/bash\nexec radiance serve --max-num-seqs "$(' + '"$(' * 2000 + "\n", 2),  # was a RecursionError
        ("#!/bin/bash\n" + "mode_x() {\n" * 5000, 67),  # was a path of 5,000 names per mode, quadratic
    ],
)
async def test_a_script_nested_past_reason_is_refused_with_its_line(script: str, line: int) -> None:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("check_serve_script", {"script_text": script})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert f"more than {serve_script.MAX_NESTING} deep (line {line})" in text
    assert "check that it is the right file" in text
