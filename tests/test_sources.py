"""sources: inline text and local files; the log roots keep an agent to the ledgers the operator allows."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from radiance_mcp.core.errors import InputError, LedgerError, SourceError
from radiance_mcp.sources.ledgers import InlineSource, LocalFileSource, allowed_local_path, resolve_local


@pytest.fixture
def tree(tmp_path: Path, example_text: str) -> Path:
    """tmp/logs (the root) with a ledger, tmp/secret.txt outside it, and links both ways."""
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "a.log").write_text(example_text)
    (tmp_path / "secret.txt").write_text("not a ledger")
    (tmp_path / "logs-evil").mkdir()
    (tmp_path / "logs-evil" / "a.log").write_text(example_text)
    (logs / "link-out.log").symlink_to(tmp_path / "secret.txt")  # planted inside, points out
    (logs / "dir-out").symlink_to(tmp_path)  # a directory link out of the root
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "link-in.log").symlink_to(logs / "a.log")  # outside, points in
    return tmp_path


@pytest.mark.parametrize(
    ("raw", "resolved"),
    [
        ("logs/a.log", "logs/a.log"),
        ("logs/sub/../a.log", "logs/a.log"),  # '..' that stays inside
        ("logs/./sub/../../logs/a.log", "logs/a.log"),
        ("elsewhere/link-in.log", "logs/a.log"),  # a link from outside to a ledger inside: the target counts
        ("logs/missing.log", "logs/missing.log"),  # allowed; reading it says 'no such file'
    ],
)
def test_allowed_paths(raw: str, resolved: str, tree: Path) -> None:
    assert allowed_local_path(f"{tree}/{raw}", [tree / "logs"]) == tree / resolved


@pytest.mark.parametrize(
    ("raw", "resolved"),
    [
        ("logs/../secret.txt", "secret.txt"),  # '..' traversal out of the root
        ("logs/" + "../" * 40 + "etc/passwd", "/etc/passwd"),  # deep traversal, past '/' from any temporary dir
        ("logs/link-out.log", "secret.txt"),  # a symlink inside the root that points out of it
        ("logs/dir-out/secret.txt", "secret.txt"),  # a directory symlink out of the root
        ("logs-evil/a.log", "logs-evil/a.log"),  # shares the root's name as a prefix only
        ("logs/..", "."),
    ],
)
def test_paths_outside_the_roots(raw: str, resolved: str, tree: Path) -> None:
    target = Path(resolved) if resolved.startswith("/") else (tree / resolved).resolve()
    with pytest.raises(InputError) as caught:
        allowed_local_path(f"{tree}/{raw}", [tree / "logs"])
    assert str(caught.value) == (
        f"log={f'{tree}/{raw}'!r} resolves to {target}, outside the allowed log roots ({tree / 'logs'}); "
        "add its directory to [server] log_roots in the fleet config, or name a service instead"
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", r"log='': a path must be non-empty and hold no NUL byte"),
        ("/var/log/a\x00.log", r"hold no NUL byte"),
        # a newline or CR in a name would start a line of shell where the name is written (the gate files' comments)
        ("/var/log/x\nfunction [ { return 0; }\n#.log", r"newline or other control character; give a file's path"),
        ("/var/log/a\r.log", r"control character; give a file's path, and rename the file if its name holds one"),
        ("logs/a.log", r"log='logs/a.log': give an absolute path"),  # relative: depends on the server's cwd
        ("../etc/passwd", r"give an absolute path"),
        ("~/../../etc/passwd", r"resolves to /etc/passwd, outside the allowed log roots"),  # '~' expands first
    ],
)
def test_malformed_paths(raw: str, message: str, tree: Path) -> None:
    with pytest.raises(InputError, match=message):
        allowed_local_path(raw, [tree / "logs"])


def test_a_path_the_cli_user_names_keeps_the_control_character_rule() -> None:
    # the CLI's own user may name any file (no log roots), but not a name that holds a line break
    with pytest.raises(InputError, match=r"^script='/tmp/a\\n\.sh': a path must be non-empty and hold no NUL"):
        resolve_local("/tmp/a\n.sh", "script")


def test_several_roots(tree: Path) -> None:
    roots = [tree / "elsewhere", tree / "logs"]
    assert allowed_local_path(f"{tree}/logs/a.log", roots) == tree / "logs" / "a.log"
    with pytest.raises(InputError, match=re.escape(f"({tree / 'elsewhere'}, {tree / 'logs'})")):
        allowed_local_path(f"{tree}/secret.txt", roots)


# ---------------------------------------------------------------------------------------
# Reading


async def test_local_file(example_path: Path) -> None:
    boot = await LocalFileSource(example_path).read()
    assert boot.source == str(example_path)
    assert boot.require("settled").line.number == 26


async def test_inline_text_and_boot_selection(example_text: str) -> None:
    source = InlineSource(example_text.replace("frank-archon", "old") + example_text)
    assert (await source.read()).require("boot_start").fields["name"] == "frank-archon"
    assert (await source.read(1)).require("boot_start").fields["name"] == "old"
    with pytest.raises(LedgerError, match=r"^log_text: boot=3 but the log holds 2 boot\(s\)"):
        await source.read(3)


async def test_inline_errors_name_log_text() -> None:
    with pytest.raises(LedgerError, match=r"^log_text: the log is empty"):
        await InlineSource("").read()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing.log", r"missing\.log: no such file; check the path or the service's log setting"),
        ("sub", r"sub: is a directory; name the log file inside it"),
        ("a.log/x", r"a\.log/x: cannot be read: Not a directory"),
    ],
)
async def test_unreadable_files(name: str, message: str, tree: Path) -> None:
    path = tree / "logs" / name
    with pytest.raises(SourceError, match=rf"^{re.escape(str(tree))}/logs/{message}"):
        await LocalFileSource(path).read()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
async def test_permission_denied(tree: Path) -> None:
    path = tree / "logs" / "a.log"
    path.chmod(0)
    with pytest.raises(SourceError, match=r"a\.log: permission denied; the server's user cannot read it"):
        await LocalFileSource(path).read()


async def test_file_that_is_not_a_ledger(tree: Path) -> None:
    with pytest.raises(LedgerError, match=rf"^{re.escape(str(tree))}/secret\.txt: no radiance ledger phrase"):
        await LocalFileSource(tree / "secret.txt").read()
