"""ledger: the phrase table and the boot-ledger reader, on the example and on variants written here."""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radiance_mcp.core import ledger
from radiance_mcp.core.boot import Boot, Line
from radiance_mcp.core.errors import LedgerError, PhraseNotFound, RadianceMCPError
from radiance_mcp.core.ledger import KEYWORDS, MAX_LINE_BYTES, PHRASES, read_text, render
from radiance_mcp.core.units import parse_size
from radiance_mcp.sources import ledger_file
from radiance_mcp.sources.config import EXAMPLES_DIR
from radiance_mcp.sources.ledger_file import read_file

Reader = Callable[..., Boot]
EXAMPLE_LOG = EXAMPLES_DIR / "frank-archon.log"


def summary(boot: Boot) -> list[tuple[str, int, dict[str, Any]]]:
    """Every hit as (phrase, line number, fields), sizes as exact MiB and blanks collapsed, to compare variants."""
    out = []
    for hit in boot.hits:
        fields: dict[str, Any] = {}
        for name, raw in hit.fields.items():
            if raw is None:
                fields[name] = None
                continue
            try:
                fields[name] = parse_size(raw).mib
            except LedgerError:
                fields[name] = re.sub(r"\s+", " ", raw).replace(",", "")
        out.append((hit.key, hit.line.number, fields))
    return out


def read_via_file(tmp_path: Path) -> Reader:
    def read(text: str, *, source: str, boot: int = -1) -> Boot:
        path = tmp_path / "ledger.log"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        return read_file(path, source=source, boot=boot)

    return read


@pytest.fixture(params=["read_text", "read_file"])
def reader(request: pytest.FixtureRequest, tmp_path: Path) -> Reader:
    """Both readers: inline text and a streamed file must give the same boot."""
    return read_text if request.param == "read_text" else read_via_file(tmp_path)


# ---------------------------------------------------------------------------------------
# The phrase table: writer and reader are one entry each


ROUND_TRIP: list[tuple[str, dict[str, object]]] = [
    ("boot_start", {"name": "frank-archon"}),
    ("flag", {"flag": "max-model-len", "value": "200000"}),
    ("budget_header", {"card": "1"}),
    ("card_total", {"size": "31.86 GiB"}),
    ("vram_weights", {"size": "23.44 GiB"}),
    ("vram_kv", {"size": "5.00 GiB"}),
    ("unclaimed", {"size": "477.30 MiB"}),
    ("budgets_total", {"budgets": "30.00 GiB", "total": "31.86 GiB", "unaccounted": "1.86 GiB"}),
    ("settled", {"card": "0", "free": "2.01 GiB", "floor": "209.19 MiB", "headroom": "96.00 MiB",
                 "static": "113.19 MiB"}),
    ("activation_arena", {"size": "10.65 GiB", "mnbt": "65536"}),
    ("claimable", {"size": "16.85 GiB"}),
    ("weights_by_tier", {"vram": "23.44 GiB", "host": "10.21 GiB", "disk": "56 GiB"}),
    ("kv_backing", {"size": "271.25 MiB", "percent": "0", "seqs": "8", "tokens": "32768", "sessions": "0.0"}),
    ("startup_stopped", {"reason": "out of memory"}),
    ("expert_prefetch", {"size": "0 B"}),
    ("no_lender", {}),
    ("fix_text", {}),
    ("backs", {"seqs": "2", "tokens": "200000"}),
    ("slab_slots", {"slots": "17548", "host": "7580"}),
    ("ledger_mover", {"slots": "1300", "size": "1.75 GiB"}),
    ("sampler", {"seqs": "2", "spec": "3", "rows": "8"}),
    ("serving", {"address": "0.0.0.0:8000"}),
]
# Template fields that are not pattern groups (the simulator fills them, the reader ignores them).
EXTRA_FIELDS: dict[str, dict[str, object]] = {
    "kv_backing": {"level": "E", "dtype": "fp8", "rate": 7488},
    "expert_prefetch": {"lender": ", no lender"},
    "fix_text": {"arena": "10.65 GiB", "kv": "271.25 MiB"},
}


def test_round_trip_covers_every_phrase() -> None:
    assert sorted(key for key, _ in ROUND_TRIP) == sorted(PHRASES)


@pytest.mark.parametrize(("key", "fields"), ROUND_TRIP, ids=[key for key, _ in ROUND_TRIP])
def test_round_trip(key: str, fields: dict[str, object]) -> None:
    """render() writes a line that holds the phrase's keyword and reads back to the same fields."""
    text = render(key, **fields, **EXTRA_FIELDS.get(key, {}))
    phrase = PHRASES[key]
    assert phrase.keyword in text
    hits = {hit.key: hit for hit in ledger.match_line(Line(1, text))}
    assert key in hits, f"{key}: {text!r} does not match its own pattern"
    for name, value in fields.items():
        assert hits[key].fields[name] == str(value)


def test_keywords_are_the_phrase_table() -> None:
    assert set(KEYWORDS) == {p.keyword for p in PHRASES.values()}
    assert ledger.BOOT_MARKER == "radiance boot"


# ---------------------------------------------------------------------------------------
# The example (PHRASEBOOK section 8)


def test_example_boot(example_text: str) -> None:
    boot = read_text(example_text, source="example")
    assert (boot.index, boot.boots_seen, boot.first_line, boot.last_line) == (1, 1, 1, 27)
    assert boot.where() == "example (boot 1 of 1, lines 1-27)"
    settled = boot.require("settled")
    assert settled.line.number == 26  # provenance: line number and text of the figure
    assert settled.line.text.startswith("W card 0 settled at 2.01 GiB free against 209.19 MiB")
    assert settled.size("free", "example").mib == Decimal("2058.24")  # 2.01 x 1,024
    assert {name: hit.fields["value"] for name, hit in boot.flags.items()} == {
        "max-model-len": "200000", "max-num-seqs": "2", "max-num-batched-tokens": "1024",
        "host-pool-mib": "7580", "tp": "1", "kv-cache-dtype": "fp8", "placement": "slab",
        "vram-weights-mib": "24000", "vram-kv-mib": "5120", "gpu-headroom-mib": "96",
    }
    # Table rows' trailing '--vram-weights-mib' is not an echoed flag (the flag lines start with 'I --').
    assert all(hit.line.number <= 11 for hit in boot.all("flag"))


def test_render_builder_matches_the_example(example_text: str, boot_text: Callable[..., str]) -> None:
    """The conftest builder (render() for every line) reads exactly as the shipped example."""
    assert summary(read_text(boot_text(), source="built")) == summary(read_text(example_text, source="example"))


def test_one_line_can_hold_two_phrases() -> None:
    boot = read_text("I radiance boot: x\nI expert prefetch 0 B, no lender\n", source="t")
    assert [(hit.key, hit.line.number) for hit in boot.hits] == [
        ("boot_start", 1), ("expert_prefetch", 2), ("no_lender", 2)
    ]


# ---------------------------------------------------------------------------------------
# Tolerance: what sits around the phrases


def _each_line(transform: Callable[[str], str]) -> Callable[[str], str]:
    return lambda text: "".join(transform(line) + "\n" for line in text.splitlines())


def _colour_level(line: str) -> str:
    return f"\x1b[1;33m{line[0]}\x1b[0m{line[1:]}"  # ESC[1;33m W ESC[0m: the level letter in colour


def _colour_sizes(line: str) -> str:
    return re.sub(r"(\d[\d,.]* [KMG]?i?B)", "\x1b[32m\\1\x1b[39m", line)  # every size green


VARIANTS: list[tuple[str, Callable[[str], str]]] = [
    ("iso timestamp", _each_line(lambda line: "2026-10-13 12:00:00.123 " + line)),
    ("podman logs -t, Z", _each_line(lambda line: "2026-10-13T10:00:00.123456789Z " + line)),
    ("podman logs -t, offset", _each_line(lambda line: "2026-10-13T12:00:00.123456789+02:00 " + line)),
    ("journald", _each_line(lambda line: "Oct 13 12:00:00 dankserver radiance[1234]: " + line)),
    ("ansi level letter", _each_line(_colour_level)),
    ("ansi inside rows", _each_line(_colour_sizes)),
    ("ansi and journald", _each_line(lambda line: "Oct 13 12:00:00 dankserver radiance[1234]: " + _colour_level(line))),
    ("crlf", lambda text: text.replace("\n", "\r\n")),
    # Columns realigned: every blank beside a figure becomes a run, existing runs double. (The engine's
    # own words stay as printed: the keywords are searched verbatim, e.g. 'settled at'.)
    ("runs of spaces", lambda text: re.sub(r"(?<=\d) | (?=\d)", "   ", text).replace("  ", "    ")),
    ("tabs", lambda text: text.replace("   ", "\t")),
    ("trailing blanks", _each_line(lambda line: line + "  \t")),
    ("thousands separators", lambda text: re.sub(r"(?<=\s)(\d{1,3})(\d{3})(?=\s|$)", r"\1,\2", text, flags=re.M)),
    ("no final newline", lambda text: text.rstrip("\n")),
    ("leading noise lines", lambda text: "podman: starting container\n\n" + text),
]


@pytest.mark.parametrize(("name", "variant"), VARIANTS, ids=[name for name, _ in VARIANTS])
def test_variants_read_as_the_example(
    name: str, variant: Callable[[str], str], example_text: str, reader: Reader
) -> None:
    expected = summary(read_text(example_text, source="example"))
    if name == "leading noise lines":  # two lines before the boot: every line number moves by 2
        expected = [(key, number + 2, fields) for key, number, fields in expected]
    assert summary(reader(variant(example_text), source="variant")) == expected


def test_thousands_separator_variant_really_has_separators(example_text: str) -> None:
    variant = dict(VARIANTS)["thousands separators"](example_text)
    assert "200,000" in variant and "24,000" in variant and "17,548" in variant


@pytest.mark.parametrize(
    ("printed", "mib"),
    [
        ("2.01 GiB", Decimal("2058.24")),  # 2.01 x 1,024
        ("2,058.24 MiB", Decimal("2058.24")),  # the same, in MiB with a separator
        ("2107637.76 KiB", Decimal("2058.24")),  # 2,058.24 x 1,024
        ("2,158,221,066 B", Decimal(2_158_221_066) / (1 << 20)),  # 2,058.2399... MiB
        ("2058MiB", Decimal(2_058)),  # no blank before the unit
    ],
)
def test_units_of_the_settled_line(printed: str, mib: Decimal, example_text: str) -> None:
    boot = read_text(example_text.replace("2.01 GiB free", f"{printed} free"), source="t")
    assert boot.require("settled").size("free", "t").mib == mib


# ---------------------------------------------------------------------------------------
# Several boots


def _three_boots(boot_text: Callable[..., str]) -> str:
    filler = [f"I POST /v1/completions 200 {n} ms" for n in range(5)]
    return "".join(boot_text(name=f"boot-{n}", filler=filler) for n in (1, 2, 3))


@pytest.mark.parametrize(
    ("boot", "index", "name", "first_line"),
    [
        (-1, 3, "boot-3", 65),  # the newest by default; each built boot is 32 lines (26 + 5 filler + 1): 2 x 32 + 1
        (-2, 2, "boot-2", 33),  # the one before: 32 + 1
        (-3, 1, "boot-1", 1),
        (1, 1, "boot-1", 1),  # 1 is the oldest
        (2, 2, "boot-2", 33),
        (3, 3, "boot-3", 65),
    ],
)
def test_several_boots(
    boot: int, index: int, name: str, first_line: int, reader: Reader, boot_text: Callable[..., str]
) -> None:
    read = reader(_three_boots(boot_text), source="three.log", boot=boot)
    assert (read.index, read.boots_seen, read.first_line) == (index, 3, first_line)
    assert read.last_line == first_line + 31
    assert read.require("boot_start").fields["name"] == name
    assert len(read.all("settled")) == 1  # the other boots' lines are not mixed in


def test_newest_boot_is_the_default(reader: Reader, boot_text: Callable[..., str]) -> None:
    assert reader(_three_boots(boot_text), source="three.log").index == 3


@pytest.mark.parametrize("boot", [0, 4, -4, 99, -99])
def test_boot_out_of_range(boot: int, reader: Reader, boot_text: Callable[..., str]) -> None:
    with pytest.raises(LedgerError, match=rf"three\.log: boot={boot} but the log holds 3 boot\(s\); use -1 \(newest\)"):
        reader(_three_boots(boot_text), source="three.log", boot=boot)


def test_boots_without_marker_split_at_flag_runs(reader: Reader, boot_text: Callable[..., str]) -> None:
    """No 'radiance boot' line: each run of echoed flags starts a boot."""
    text = _three_boots(boot_text).replace("I radiance boot:", "I starting:")
    read = reader(text, source="nomarker.log", boot=-2)
    assert (read.index, read.boots_seen) == (2, 3)
    assert len(read.all("settled")) == 1


def test_a_log_that_is_only_a_boot_tail_is_one_boot(reader: Reader) -> None:
    text = render("settled", card=0, free="2.01 GiB", floor="209.19 MiB", headroom="96.00 MiB", static="113.19 MiB")
    assert reader(text + "\n", source="tail.log").boots_seen == 1


# ---------------------------------------------------------------------------------------
# Missing phrases


@pytest.mark.parametrize("key", sorted(PHRASES))
def test_missing_phrase_names_its_keyword_and_the_source(key: str, example_text: str) -> None:
    kept = [line for n, line in enumerate(example_text.splitlines(), 1)
            if key not in {hit.key for hit in ledger.match_line(Line(n, line))}]
    if key == "boot_start":
        kept.insert(0, "I starting")  # keep line numbers; the flag run still starts the boot
    boot = read_text("\n".join(kept) + "\n", source="/logs/frank.log")
    with pytest.raises(PhraseNotFound) as caught:
        boot.require(key)
    message = str(caught.value)
    assert repr(PHRASES[key].keyword) in message
    assert f"({key})" in message
    assert re.search(r"^/logs/frank\.log \(boot 1 of 1, lines \d+-\d+\): the phrase", message)
    assert (caught.value.phrase_key, caught.value.source) == (key, boot.where())


# ---------------------------------------------------------------------------------------
# Bad input: a clear LedgerError naming the source, never a traceback, never a figure


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"bad\.log: the log is empty"),
        ("\n\n  \n", r"bad\.log: (the log is empty|no radiance ledger phrase)"),
        ("hello\nworld\n", r"bad\.log: no radiance ledger phrase"),
        ("I radiance boot: x\n", r"bad\.log: no radiance ledger phrase|settled"),
        ("\x00\x01\x02\xff\xfe" * 100, r"bad\.log: no radiance ledger phrase"),
    ],
    ids=["empty", "blank lines", "not a ledger", "a marker only", "binary junk"],
)
def test_bad_text(text: str, message: str, reader: Reader) -> None:
    try:
        boot = reader(text, source="bad.log")
    except LedgerError as exc:
        assert re.search(message, str(exc))
    else:  # only the marker-only log parses (its one hit is the marker); it holds no figure
        assert [hit.key for hit in boot.hits] == ["boot_start"]
        with pytest.raises(PhraseNotFound, match=r"bad\.log .*'settled at'"):
            boot.require("settled")


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "core"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB of every byte value, newlines included
    with pytest.raises(LedgerError, match=rf"{re.escape(str(path))}: no radiance ledger phrase"):
        read_file(path, source=str(path))


def test_overlong_line_in_text_is_skipped_and_counted(example_text: str) -> None:
    junk = "x" * (MAX_LINE_BYTES + 1)
    boot = read_text(junk + "\n" + example_text, source="t")
    assert boot.skipped_long_lines == 1
    assert boot.require("settled").line.number == 27  # the junk line still counts: 26 + 1


HUGE_LINE_BYTES = 64 << 20
"""A line 1,024 times MAX_LINE_BYTES and 64 chunks long: past it, size is not the point, memory is
(bench/bench_ledger.py reads a 1 GiB one and measures the reader's RSS)."""
HELD_BYTES_BOUND = 8 << 20
"""What read_file may hold at once: a chunk (1 MiB), a partial line (64 KiB) and their copies."""


@pytest.fixture
def huge_line(tmp_path: Path) -> Path:
    """HUGE_LINE_BYTES without a newline, sparse: no disk used, and read_file must not hold it."""
    path = tmp_path / "one-line.log"
    with path.open("wb") as stream:
        stream.truncate(HUGE_LINE_BYTES)
    return path


def _peak_bytes(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        read()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.slow
def test_huge_line_without_newline(huge_line: Path) -> None:
    def read() -> None:
        with pytest.raises(LedgerError, match=rf"{re.escape(str(huge_line))}: no radiance ledger phrase"):
            read_file(huge_line, source=str(huge_line))

    assert _peak_bytes(read) < HELD_BYTES_BOUND


@pytest.mark.slow
def test_huge_line_after_a_boot_is_skipped(huge_line: Path, example_text: str) -> None:
    with huge_line.open("r+b") as stream:
        stream.write(example_text.encode())  # the boot, then 64 MiB - 1,4xx bytes of NULs, no newline
    boots: list[Boot] = []
    assert _peak_bytes(lambda: boots.append(read_file(huge_line, source="big.log"))) < HELD_BYTES_BOUND
    assert boots[0].require("settled").line.number == 26
    assert boots[0].skipped_long_lines == 1


@pytest.mark.parametrize("chunk", [1, 7, 13, 64])
def test_chunk_boundaries_do_not_matter(
    chunk: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, boot_text: Callable[..., str]
) -> None:
    """Markers, lines and CRLF split across chunks read as in one piece."""
    text = _three_boots(boot_text).replace("\n", "\r\n")
    expected = summary(read_text(text, source="t", boot=-2))
    monkeypatch.setattr(ledger_file.blocks, "CHUNK_BYTES", chunk)
    assert summary(read_via_file(tmp_path)(text, source="t", boot=-2)) == expected


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [5, 4096, MAX_LINE_BYTES - 1, MAX_LINE_BYTES + 2, 8 << 20])
@pytest.mark.parametrize("boot", [-1, 1, 2])
def test_overlong_and_coloured_lines_inside_a_boot(
    chunk: int, boot: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, boot_text: Callable[..., str]
) -> None:
    """Lines over MAX_LINE_BYTES anywhere in a boot are skipped and counted, whatever the chunking."""
    long = "y" * (MAX_LINE_BYTES + 1)
    exact = "z" * MAX_LINE_BYTES  # at the limit: kept
    filler = [long, "\x1b[2mI kv cache \x1b[0m", exact, long + " settled at 1 GiB", long, "tail"]
    text = "".join(boot_text(name=f"b{n}", filler=filler) for n in (1, 2))
    text = text.replace("I claimable", long + "\nI claimable")
    expected = read_text(text, source="t", boot=boot)
    monkeypatch.setattr(ledger_file.blocks, "CHUNK_BYTES", chunk)
    got = read_via_file(tmp_path)(text, source="t", boot=boot)
    assert summary(got) == summary(expected)
    assert (got.first_line, got.last_line) == (expected.first_line, expected.last_line)
    assert got.skipped_long_lines == 4  # in this boot: one before 'claimable', three in the filler
    assert expected.skipped_long_lines == 8  # read_text counts the whole text's


# ---------------------------------------------------------------------------------------
# Properties


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_read_text_raises_only_its_own_errors_on_any_text(text: str) -> None:
    try:
        read_text(text, source="fuzz")
    except RadianceMCPError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary())
def test_read_text_raises_only_its_own_errors_on_any_bytes(data: bytes) -> None:
    try:
        read_text(data.decode("utf-8", "replace"), source="fuzz")
    except RadianceMCPError:
        pass


LEDGERISH = st.lists(
    st.one_of(
        st.sampled_from(EXAMPLE_LOG.read_text().splitlines()),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
        st.sampled_from(["", "\r", "\x1b[0m", "I radiance boot", "radiance boot: x\x85y", "\u2028", "\x0c",
                         "I radiance boot radiance boot", "x" * (MAX_LINE_BYTES + 1), "\x1b[1mvram_kv\x1b[0m 5 GiB"]),
    ),
    max_size=60,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=LEDGERISH, boot=st.integers(-3, 3))
def test_read_text_and_read_file_agree(lines: list[str], boot: int, tmp_path: Path) -> None:
    """The same ledger pasted inline or read from a file gives the same boot, the same line numbers."""
    text = "\n".join(lines)
    results = []
    for read in (read_text, read_via_file(tmp_path)):
        try:
            results.append(("ok", summary(read(text, source="s", boot=boot))))
        except LedgerError as exc:
            results.append(("error", type(exc).__name__))
    assert results[0] == results[1]


@pytest.mark.parametrize("separator", ["\x85", "\x0c", "\u2028", "\r", "\x1c"])
def test_only_newline_ends_a_line(separator: str, reader: Reader, example_text: str) -> None:
    """Other line breaks str.splitlines() knows stay inside the line, as in a file: line numbers agree."""
    boot = reader(f"junk{separator}more junk\n" + example_text, source="t")
    assert boot.require("settled").line.number == 27  # 26 + the one junk line


def test_a_line_with_the_marker_twice_starts_one_boot(reader: Reader, example_text: str) -> None:
    boot = reader(example_text.replace("radiance boot: frank-archon", "radiance boot: radiance boot"), source="t")
    assert (boot.index, boot.boots_seen) == (1, 1)
