"""plan-free-vram at a 120-column terminal as a newcomer reads it (issue 26 item 3): counts as whole numbers in
their unit ('4 seats', not '4.00'), a refused boot's reason said once, the word 'partial' explained where it is
printed, each service's options and each problem's services shown, a path in a note whole (a command to copy).
The figures are the demo fleet's (radiance_mcp.sim) and a small fleet of recorded ledgers built here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_run import CliRunner, Ran

from radiance_mcp.sources.config import CONFIG_ENV, EXAMPLES_DIR

LEDGERS = Path(__file__).parent / "fixtures" / "ledgers"
COLUMNS = {"COLUMNS": "120"}


@pytest.fixture(autouse=True)
def no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)


def rows(ran: Ran) -> list[str]:
    """Each line of stdout with its runs of spaces as one: a table's row as its cells."""
    return [" ".join(line.split()) for line in ran.stdout.splitlines()]


def section(ran: Ran, name: str) -> list[str]:
    """The lines of one block ('best:') of the answer, to its blank line."""
    lines = rows(ran)
    start = lines.index(f"{name}:") + 1
    return lines[start:lines.index("", start)] if "" in lines[start:] else lines[start:]


def test_the_demo_fleets_answer_reads_as_counts_once_and_explained(cli: CliRunner, tmp_path: Path) -> None:
    ran = cli("plan-free-vram", "--demo", cwd=tmp_path, env=COLUMNS)
    assert ran.returncode == 0, ran.stderr
    best = section(ran, "best")
    assert best[0] == "by service option adds_mib after gain"
    # Counts are whole: 4 seats (+1), a 230,653-token window (+164,277), 17,440 resident slots (+5,498).
    assert "seats at the window frank-archon more KV, fp8 1,849 4 seats +1" in best
    assert "seats at the window lowpool more KV, bf16 1,577 1 seat +1" in best
    assert "window at the seats qwen38-proven more KV, fp8 9,385 230,653 tokens +164,277" in best
    assert "resident slots qwen38-proven more slab 9,385 17,440 slots +5,498" in best
    assert not re.search(r"\b\d[\d,]*\.00\b", "\n".join(best)), best
    # The refused boot's reason is printed once, with its remedy, under problems; unreadable names its problem.
    said = " ".join(ran.stdout.split())
    assert said.count("this boot refused to start") == 1, ran.stdout
    assert said.count("Next: audit_step_shape (this boot as the candidate") == 1, ran.stdout
    assert "kind refused boot rule - count 1 services qwen38-wide detail" in said
    assert section(ran, "unreadable") == ["service problem where error", "qwen38-wide 0 - -"]
    assert said.index("problems: kind refused boot") < said.index("unreadable: service problem where error")
    assert "kind below its contract rule pool_contract count 1 services lowpool detail 2 x 200,000 x 7,488 B" in said
    # 'partial' is said in words where it is printed first: the summary's headline.
    assert "sharing partial" in rows(ran)
    assert said.count("some services name their cards, not all (notes names the others)") == 1, ran.stdout
    assert "- 5 services, 4 planned: 14,660 MiB of headroom, each physical card once (sharing partial: some " \
           "services name their cards, not all (notes names the others))" in said
    # Each service's options (they were left out of the table), each shared card's services.
    assert any(row.startswith("frank-archon 1,849 1,849 more KV, fp8 +1,849 MiB: seats at 200,000 tokens: 4 (now 3)")
               for row in section(ran, "rows")), section(ran, "rows")
    assert "gpubox:1 lowpool card 0, twin card 1 1,577 twin card 1 reads 1,787 MiB - 209.19 (lowpool's floor) = " \
           "1,577 MiB" in section(ran, "physical_cards")
    assert max(map(len, ran.stdout.splitlines())) <= 120


def _fleet(root: Path) -> Path:
    """Two settled radiance services, two refused vLLM boots (the same reason), one file with no ledger."""
    logs = root / "logs"
    logs.mkdir()
    texts = {"ok-a": EXAMPLES_DIR / "frank-archon.log", "ok-b": EXAMPLES_DIR / "frank-archon.log",
             "refused-a": LEDGERS / "vllm" / "v0.2.7_alpaca2_refused.log",
             "refused-b": LEDGERS / "vllm" / "v0.2.7_alpaca2_refused.log"}
    lines = ["[server]", f"log_roots = {json.dumps([str(logs)])}"]
    for name, source in [*texts.items(), ("empty", None)]:
        (logs / f"{name}.log").write_text(source.read_text() if source else "no ledger here\n", encoding="utf-8")
        lines += ["", f"[services.{name}]", f"log = {json.dumps(str(logs / f'{name}.log'))}"]
    (root / "fleet.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root / "fleet.toml"


def test_a_fleet_of_refused_and_unreadable_ledgers_says_each_reason_once(cli: CliRunner, tmp_path: Path) -> None:
    ran = cli("plan-free-vram", "--config", _fleet(tmp_path), cwd=tmp_path, env=COLUMNS)
    assert ran.returncode == 0, ran.stderr
    # The refused boots' reason is said once, in the problem that names both services; unreadable names the problem
    # of each, and the second's own ledger (its reason is the first's word for word).
    said = " ".join(ran.stdout.split())  # its lines as one text: a cell wraps where its path's length puts it
    assert said.count("The model's max seq len (4096) is larger than") == 1, ran.stdout
    assert said.count("A refused boot never settles") == 1, ran.stdout
    # (a table or, too wide at its path's length, its records stacked: read as one text between the headings)
    problems, unreadable = said[said.index("problems:"):said.index("unreadable:")], said[said.index("unreadable:"):]
    assert all(name in problems for name in ("empty", "refused-a", "refused-b")), problems
    # refused-a's ledger is named by the problem's detail, refused-b's by its own entry: each once, in its place
    assert said.count("refused-a.log") == 1 and "refused-a.log" in problems, ran.stdout
    assert said.count("refused-b.log") == 1 and "refused-b.log" in unreadable, ran.stdout
    assert "each physical card once (sharing unknown: no service names its cards)" in said
    assert "seats at the window ok-a more KV, fp8 1,849 4 seats +1" in section(ran, "best")


def test_one_services_plan_says_one_seat_and_a_note_keeps_its_paths(cli: CliRunner, tmp_path: Path) -> None:
    twin = cli("plan-free-vram", "--demo", "--service", "twin", cwd=tmp_path, env=COLUMNS)
    assert any(row.startswith("gains: seats at 200,000 tokens 2 seats 1 seat (6,697 - 448) MiB") for row in rows(twin))
    assert "1 seats" not in twin.stdout
    gates = cli("render-gates", "--demo", "--service", "frank-archon", "--vram-kv-mib", "6000", "--seqs", "2",
                cwd=tmp_path, env=COLUMNS)
    said = re.sub(r"/\s+", "/", " ".join(gates.stdout.split()))  # a long path is wrapped after a '/'
    # The command to run is whole (it was 'run: bats (see bats_file above)').
    assert re.search(r"then run: bats /\S+/scripts/frank-archon\.bats; the server writes nothing", said), said
    assert "(see bats_file above)" not in said
