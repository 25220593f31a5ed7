"""What a score was measured with: the scorer's version and the scenario set's version, named once.

Every report names both (``radiance-mcp eval``'s text and JSON, the Inspect task's metadata
and each sample's score), so two scores are compared only when both versions agree:

- ``SCORER_VERSION``: raised by hand whenever a change to the scorer (score.py, claims.py,
  numbers.py, plans.py, rules.py, record.py's reader) can change a verdict on some record;
- the scenario set's version: ``sha256:`` and the first 12 hex digits of a digest of the
  scenario files (each file's name and bytes, by name), so any edit to a question, a fact, a
  tolerance or a fleet gives another version, and the same files give the same one anywhere.

Pure but for reading the scenario files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from radiance_mcp.evals.scenario import scenario_files

SCORER_VERSION = 2
"""1: a fact counted if its number appeared anywhere in the answer (before issue 27). 2: figures grounded in the
run's tool results, claims read from a submitted answer or text, rules judged only where exercised (issue 27)."""
DIGEST_CHARS = 12


def scenario_set_version(directory: str | Path | None = None, files: Iterable[str | Path] = ()) -> str:
    """The digest of the scenario files of ``directory`` (default: the shipped evals/scenarios/), and of any
    other scenario file named (``--scenario path.toml``); ``sha256:`` + 12 hex digits."""
    paths = {p.resolve() for p in scenario_files(directory)} | {Path(f).resolve() for f in files}
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda p: (p.name, str(p))):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return f"sha256:{digest.hexdigest()[:DIGEST_CHARS]}"


def versions(directory: str | Path | None = None, files: Iterable[str | Path] = ()) -> dict[str, str | int]:
    """Both versions, as the reports' JSON names them."""
    return {"scorer_version": SCORER_VERSION, "scenario_set_version": scenario_set_version(directory, files)}


def versions_line(named: dict[str, str | int]) -> str:
    """Both versions, as the reports' text names them."""
    return f"scorer version {named['scorer_version']}, scenario set {named['scenario_set_version']}"
