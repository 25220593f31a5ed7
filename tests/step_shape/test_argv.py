"""argv.compare_argv: two dry-run outputs, byte for byte; the first differing argument."""

from __future__ import annotations

import pytest

from radiance_mcp.core.audit.argv import compare_argv, split_argv
from radiance_mcp.core.errors import InputError

PROVEN = [
    "radiance", "--model", "/models/qwen38", "--max-model-len", "32768", "--max-num-seqs", "8",
    "--max-num-batched-tokens", "1024", "--host-pool-mib", "7580", "--kv-cache-dtype", "bf16",
]


def lines(argv: list[str]) -> str:
    return "".join(f"{a}\n" for a in argv)


def with_value(index: int, value: str) -> list[str]:
    return [value if i == index else a for i, a in enumerate(PROVEN)]


# (candidate argv, identical, first differing index, proven value there, candidate value there)
CASES = [
    pytest.param(PROVEN, True, None, None, None, id="identical"),
    pytest.param(with_value(8, "1025"), False, 8, "1024", "1025", id="one byte in a value"),
    pytest.param(with_value(8, "65536"), False, 8, "1024", "65536", id="the wide step"),
    pytest.param(with_value(5, "--max-num-seqs "), False, 5, "--max-num-seqs", "--max-num-seqs ",
                 id="a trailing blank inside an argument"),
    pytest.param(with_value(5, "\u2010-max-num-seqs"), False, 5, "--max-num-seqs", "\u2010-max-num-seqs",
                 id="a unicode hyphen"),
    pytest.param([*PROVEN, "--enforce-eager"], False, 13, None, "--enforce-eager", id="candidate has one more"),
    pytest.param(PROVEN[:-2], False, 11, "--kv-cache-dtype", None, id="candidate has two fewer"),
    pytest.param(PROVEN[:5] + PROVEN[7:], False, 5, "--max-num-seqs", "--max-num-batched-tokens",
                 id="a flag dropped in the middle"),
]


@pytest.mark.parametrize(("candidate", "identical", "index", "proven_value", "candidate_value"), CASES)
def test_compare_one_per_line(
    candidate: list[str], identical: bool, index: int | None, proven_value: str | None, candidate_value: str | None
) -> None:
    result = compare_argv(lines(PROVEN), lines(candidate), proven_label="fp8", candidate_label="bf16")
    assert result.format == "lines"
    assert result.identical_bytes is identical and result.identical_argv is identical
    if identical:
        assert result.first_difference is None and result.first_byte_offset is None
        assert result.summary.startswith("identical, byte for byte")
        return
    first = result.first_difference
    assert first is not None
    assert (first.index, first.proven, first.candidate) == (index, proven_value, candidate_value)
    assert f"argument {index}" in result.summary
    assert result.edits


def test_the_first_differing_character_is_named() -> None:
    result = compare_argv(lines(PROVEN), lines(with_value(5, "\u2010-max-num-seqs")))
    assert result.first_difference is not None and result.first_difference.char_offset == 0
    assert "U+002D vs '\u2010' U+2010" in result.first_difference.detail


def test_count_difference_is_stated() -> None:
    result = compare_argv(lines(PROVEN), lines([*PROVEN, "--enforce-eager"]))
    assert result.first_difference is not None
    assert "(proven 13 arguments, candidate 14)" in result.first_difference.detail
    assert result.edits == ("candidate adds ['--enforce-eager'] at index 13",)


def test_flag_changes_pair_flags_with_values() -> None:
    result = compare_argv(lines(PROVEN), lines(with_value(8, "65536")))
    assert result.flag_changes == (("--max-num-batched-tokens", "1024", "65536"),)


def test_same_argv_different_bytes_is_not_identical() -> None:
    shell_a = "radiance --max-num-seqs 8 --max-num-batched-tokens 1024\n"
    shell_b = "radiance  --max-num-seqs 8 --max-num-batched-tokens 1024\n"  # two blanks
    result = compare_argv(shell_a, shell_b)
    assert result.format == "shell"
    assert result.identical_argv and not result.identical_bytes
    assert result.first_byte_offset == 9 and result.first_difference is None
    assert "bytes differ at offset 9" in result.summary


def test_missing_trailing_newline_is_a_byte_difference() -> None:
    result = compare_argv(lines(PROVEN), lines(PROVEN).rstrip("\n"))
    assert result.identical_argv and not result.identical_bytes


@pytest.mark.parametrize(
    ("text", "fmt", "argv", "layout"),
    [
        ("a\nb c\n", "lines", ["a", "b c"], "lines"),
        ("a\nb\n", "auto", ["a", "b"], "lines"),
        ("radiance --max-num-seqs 8\n", "auto", ["radiance", "--max-num-seqs", "8"], "shell"),
        ("radiance \\\n  --model '/m/q 38' \\\n  --tp 1\n", "auto", ["radiance", "--model", "/m/q 38", "--tp", "1"],
         "shell"),
        ("a\x00b c\x00", "auto", ["a", "b c"], "nul"),
        ("", "auto", [], "shell"),
    ],
)
def test_split_argv(text: str, fmt: str, argv: list[str], layout: str) -> None:
    assert split_argv(text, fmt) == (argv, layout)  # type: ignore[arg-type]


def test_unreadable_shell_line_names_the_side() -> None:
    with pytest.raises(InputError, match="candidate: cannot be read as a shell command line"):
        compare_argv("radiance --tp 1\n", "radiance --model 'unclosed\n")
