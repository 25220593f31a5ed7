"""Every subcommand's --help says what it does and what each option means (issue 26, item 3): a parser
description for each subcommand, a help text for each option. The parser is built here, as main() builds it."""

from __future__ import annotations

import argparse

from radiance_mcp.app import cli
from radiance_mcp.tools import FAMILIES, family


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli._parser([spec for module in FAMILIES for spec in family(module)])
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def test_every_subcommand_has_a_description_and_every_option_a_help_text() -> None:
    subcommands = _subcommands()
    assert {"serve", "demo", "eval", "doctor", "compute-ceiling", "token-count-probe"} <= set(subcommands)
    bare = [name for name, sub in subcommands.items() if not (sub.description or "").strip()]
    unexplained = [f"{name} {'/'.join(action.option_strings)}" for name, sub in subcommands.items()
                   for action in sub._actions if not (action.help or "").strip()]
    assert not bare, f"subcommands without a description: {bare}"
    assert not unexplained, f"options without help: {unexplained}"
