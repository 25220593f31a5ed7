"""Every subcommand's --help says what it does and what each option means (issue 26, item 3): a parser
description for each subcommand, a help text for each option. The parser is built here, as main() builds it."""

from __future__ import annotations

import argparse
import re

from cli_run import CliRunner

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


SUFFIX = re.compile(r"\s*\((JSON|default [^)]*)\)\s*$")
"""What the CLI adds to a field's text ('(JSON)', '(default -1)'): not help by itself."""
ENGINE_FLAG = re.compile(r"^\(?--[\w-]+\)?\.?$")
"""A help that is only the engine's flag ('--max-num-seqs.'): a name, not what it means."""


def _said(help_text: str) -> str:
    """An option's help without the suffixes the CLI adds."""
    while (found := SUFFIX.search(help_text)) is not None:
        help_text = help_text[:found.start()]
    return help_text.strip()


def test_every_option_says_what_it_means_and_a_json_one_its_shape_by_an_example() -> None:
    """Help is a phrase of two words at least beyond '(JSON)' or '(default ...)', never a bare flag name or a
    Python/JSON 'null'; an option that takes JSON shows an example ('e.g. [...]'); every --help prints."""
    vague, unexampled, null = [], [], []
    for name, sub in _subcommands().items():
        sub.format_help()  # a '%' unescaped in a help text raises here
        for action in sub._actions:
            if not action.option_strings or action.option_strings[0] == "-h":
                continue
            option, said = f"{name} {action.option_strings[0]}", _said(action.help or "")
            if len(said.split()) < 2 or ENGINE_FLAG.match(said):
                vague.append(f"{option}: {action.help!r}")
            takes_json = getattr(action.type, "__qualname__", "").startswith("_json_arg")
            if takes_json and not ("JSON" in (action.help or "") and re.search(r"e\.g\. [\[{]", said)):
                unexampled.append(f"{option}: {action.help!r}")
            if re.search(r"\b(null|None|PydanticUndefined)\b", action.help or ""):
                null.append(f"{option}: {action.help!r}")
    assert not vague, "options whose help says nothing of what they mean:\n" + "\n".join(vague)
    assert not unexampled, "JSON options without an example of their shape:\n" + "\n".join(unexampled)
    assert not null, "options whose help shows a Python or JSON null:\n" + "\n".join(null)


def test_compute_ceiling_help_shows_the_reserves_shape_and_the_boot_default(cli: CliRunner) -> None:
    ran = cli("compute-ceiling", "--help", env={"COLUMNS": "120"})
    text = " ".join(ran.stdout.split())
    assert ran.returncode == 0
    assert ('--reserves RESERVES MiB held back below the ceiling, as a JSON list of {"mib", "label"} objects, each '
            'citing its reserve_candidates line ("line": N) or marked "personal": true; e.g. [{"mib": 256, "label": '
            '"safety", "personal": true}] --outside-free') in text
    assert "--boot BOOT which boot of the ledger: -1 the newest, -2 the one before, 1 the oldest (default -1)" in text
    assert "--container CONTAINER a container on host whose podman logs are the ledger --boot" in text  # no default
    assert max(map(len, ran.stdout.splitlines())) <= 120
