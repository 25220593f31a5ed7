"""The rule book holds every rule once: each home is a function that exists, every rule a raise site names is
in the book, the evals catch only the book's rules, and a refusal's rule reaches an MCP client as data."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from mcp import Client
from shared_server import empty_fleet_server

import radiance_mcp
from radiance_mcp.core.errors import REFUSAL_META, GuardRailError
from radiance_mcp.core.rules import book
from radiance_mcp.evals import rules as eval_rules

PACKAGE = Path(radiance_mcp.__file__).parent


def _rule_names_raised() -> dict[str, list[str]]:
    """rule="..." and Check("...", ...) at every call site in the package, by rule name (read with ast)."""
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            names = [k.value for k in node.keywords if k.arg == "rule"]
            if isinstance(node.func, ast.Name) and node.func.id == "Check" and node.args:
                names.append(node.args[0])
            for name in names:
                if isinstance(name, ast.Constant):
                    found.setdefault(name.value, []).append(f"{path.name}:{node.lineno}")
    return found


@pytest.mark.parametrize("rule", book.RULES, ids=lambda r: r.name)
def test_every_rule_has_one_home_that_exists(rule: book.Rule) -> None:
    module, _, attribute = rule.home.partition(":")
    target: object = importlib.import_module(f"radiance_mcp.{module}")
    for part in attribute.split("."):
        target = getattr(target, part)
    assert callable(target), rule.home


def test_every_rule_a_refusal_names_is_in_the_book() -> None:
    raised = _rule_names_raised()
    assert set(raised) - set(book.BY_NAME) == set(), raised
    assert set(eval_rules.BY_NAME) <= set(book.BY_NAME)
    # The guard rails cover the rules the evals catch by refusal.
    assert {n for n, r in eval_rules.BY_NAME.items() if "refusal" in r.detection} <= set(raised)


def test_a_check_names_only_a_rule_of_the_book() -> None:
    with pytest.raises(KeyError, match="no rule named 'pool_contrat'"):
        book.Check("pool_contrat", "fail", "")


def test_a_refusal_keeps_its_message_whole_and_its_rule_as_data() -> None:
    exc = book.Check("decode_tokens", "fail", "8 < 128", remedy="ask for 512").refusal("gen_tokens=8: ask for 512")
    assert isinstance(exc, GuardRailError) and str(exc) == "gen_tokens=8: ask for 512"
    assert exc.refusal_data() == {"rule": "decode_tokens", "arithmetic": "8 < 128", "remedy": "ask for 512"}
    assert GuardRailError("no rule").refusal_data() is None


async def test_an_mcp_client_reads_the_rule_of_a_refusal_from_the_result() -> None:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("compute_ceiling", {"log_text": "x\n", "reserve": []})
        plain = await client.call_tool("compute_ceiling", {"log_text": "x\n"})
    assert result.is_error and (result.meta or {}).get(REFUSAL_META) == {"rule": "argument_names"}
    text = result.content[0].text  # type: ignore[union-attr]
    assert "reserve" in text and "[rule:" not in text
    assert plain.is_error and not (plain.meta or {}).get(REFUSAL_META)  # an unreadable log breaks no rule
