"""SSH to the fleet's hosts: connections, the command templates, quoting, timeouts, caps.

Three templates run on a host, nothing else: the ledger read (below), the read of a serve
script and its env file, and two modes' dry runs (see "The audit's templates"). All three
are fixed sh text sent the same way, with every argument checked, then quoted.

Every use of asyncssh lives here, imported inside the functions that need it so the server
starts without loading it. A ledger read is ONE command on the host, ``exec /bin/sh -s``, fed
the fixed POSIX sh program ``_PROGRAM`` below plus one call line per log; every argument is
validated first and then ``shlex.quote``d, so no text an agent sends, and no text the host
sends back, can become shell syntax. The program cuts the requested boot out on the host and sends back
only the lines holding one of ``ledger.KEYWORDS``, numbered, so a 1 GiB log of 50 boots moves
a few KiB.

How a file is read (rm_file), cheapest first:
  * at most Limits.small_file_bytes: one pass over the whole file (rm_whole);
  * a checkpoint of the last read (its newest boot marker, where it stopped) still holds: only
    the bytes after it (rm_file; N when nothing was added, T when the lines go on);
  * a boot counted from the end (-1, -2, ...): the marker is searched back from the end in
    chunks of 1, 2, 4 MiB ... (rm_last), then only that boot is cut (rm_range). The lines before
    it are counted only when they are at most Limits.count_before_bytes; else its lines count
    from its marker's byte offset (O line), so the cost follows the boot, not the file;
  * a boot counted from the start (1, 2, ...): one grep pass numbers every marker, then the boot.

Output protocol (one line each; ``<n>`` is a per-call random nonce a log line
cannot guess, so no log line can pass for a control line)::

    #<n> S <i>                          section i begins (one per log, in request order)
    #<n> B <i> <boot> <boots_seen>      the boot cut out, 1 = oldest, and how many there are
    <line number>:<text>                a phrase line of that boot
    #<n> K <i> <skipped>                end of section i; keyword lines over MAX_LINE_BYTES skipped
    #<n> R <i> <first> <last>           the boot's first and last line numbers in the log
    #<n> C <i> <inode> <offset> <line> <boot> <base> <text>  the newest boot marker: the next read's
                                        anchor (base: '-', or the offset its line and boot count from)
    #<n> O <i> <offset> <n>             the boot's lines count from 1 at the line at offset (those
                                        before were not counted); it is the n-th boot from the end
    #<n> T <i>                          the lines continue the boot the last read cut (files)
    #<n> U <i> <offset> <line> <cksum>  where this read of the newest boot stopped: the next one goes on
    #<n> N <i>                          nothing was added since that stop: the last read's answer stands
    #<n> X <i> <code> [<number>]        section i failed: missing, outside, notfile, ...
    #<n> E <i> <text>                   podman's last error line, for the message
    #<n> Z                              the command ran to its end

Connections are pooled per host entry, reused across tool calls and closed when idle. Host
keys are always verified against known_hosts; nothing here can turn that off.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import posixpath
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from radiance_mcp.constants import MAX_BOOT, MAX_PATH_CHARS
from radiance_mcp.errors import InputError, LedgerError, RemoteError, SourceError
from radiance_mcp.ledger import BOOT_MARKER, KEYWORDS, MAX_LINE_BYTES, Line, clean, select_boot

if TYPE_CHECKING:
    import asyncssh


# ---------------------------------------------------------------------------------------
# Targets and limits


@dataclass(frozen=True)
class SSHTarget:
    """One host entry of the fleet config, as an SSH target."""

    name: str
    """The host's name in the fleet file: every message names it."""
    address: str
    """Hostname, IP or ~/.ssh/config alias (Hostname, User, Port, IdentityFile are read there)."""
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    known_hosts: str | None = None
    """The known_hosts file to verify the host key with; None: ssh config's, else ~/.ssh/known_hosts."""
    ssh_config: str | None = None
    """An ssh_config file to read instead of ~/.ssh/config."""
    log_roots: tuple[str, ...] = ()

    def where(self) -> str:
        at = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        shown = f"{at}{self.address}{port}"
        return self.name if shown == self.name else f"{self.name} ({shown})"


@dataclass(frozen=True)
class Limits:
    connect_timeout_s: float = 10.0
    """TCP connect, key exchange and login, together."""
    command_timeout_s: float = 60.0
    """One command (a ledger read, a file read; a first read of the newest boot of a 1 GiB log takes about
    0.2 s on the host, of boot=1 about half a second).
    Dry runs get their own limit per mode, plus this."""
    cap_bytes: int = 4 * 1024 * 1024
    """Output of one command (stdout + stderr); a boot's phrase lines are a few KiB."""
    idle_close_s: float = 120.0
    """A connection unused this long is closed."""
    channels_per_host: int = 8
    """Concurrent commands on one connection (OpenSSH's MaxSessions defaults to 10)."""
    count_before_bytes: int = 16 * 1024 * 1024
    """A boot counted from the end gets exact line numbers and its index when the bytes before it are
    at most this many (counting them costs a pass over them); past that its lines count from its marker."""
    small_file_bytes: int = 1024 * 1024
    """A log file this small is cut in one pass on every read (no checkpoint: checking one costs more)."""


# ---------------------------------------------------------------------------------------
# Argument rules. Each one stops a way of turning a ledger read into something else.

CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""podman's own rule for names (and IDs are hex): nothing a shell or podman's flags could read."""


def check_container(name: str) -> str:
    # Security: the name reaches `podman logs`; a strict pattern leaves no room for shell
    # syntax, a leading '-' (flag injection such as '--help' or '--latest') or a second word.
    if not isinstance(name, str) or not CONTAINER_NAME.fullmatch(name):
        raise InputError(
            f"container={name!r}: a container name is 1-128 of A-Z a-z 0-9 _ . - and starts with a letter "
            "or digit; give the name `podman ps -a` shows on the host"
        )
    return name


def check_remote_path(path: str, roots: Sequence[str], host: str, *, argument: str = "log") -> str:
    """The path, if it is a plain absolute path under one of the host's log roots.

    argument is the tool argument (or config key) the path came from; messages name it.

    This is the lexical check, made here; the program checks again on the host after
    resolving symlinks, which only the host can see.
    """
    if not isinstance(path, str) or not path:
        kind = "ledger file" if argument == "log" else "file"
        raise InputError(f"{argument}={path!r}: give the absolute path of the {kind} on host {host}")
    # Security: NUL, newline and other control characters could end the command line or a
    # quoted word early and smuggle a second command; no log file needs them.
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        raise InputError(f"{argument}={path!r}: a path may not hold NUL, newline or other control characters")
    if len(path) > MAX_PATH_CHARS:
        raise InputError(f"{argument}=...: the path is {len(path)} characters; at most {MAX_PATH_CHARS}")
    # The command travels as UTF-8: a lone surrogate (the CLI's stand-in for a byte that is not
    # UTF-8) cannot be encoded into it.
    try:
        path.encode()
    except UnicodeEncodeError:
        raise InputError(f"{argument}={path!r}: a path must be UTF-8 text; give the file a UTF-8 name on "
                         f"host {host}") from None
    # Security: a leading '-' would be read as an option by the tools it is handed to.
    if path.startswith("-"):
        raise InputError(f"{argument}={path!r}: a path may not start with '-'; give it from '/'")
    if not path.startswith("/"):
        raise InputError(f"{argument}={path!r}: give an absolute path on host {host} (it starts with '/')")
    # Security: '..' (or '.', '//') would let a path named under a root climb out of it.
    parts = path.split("/")[1:]
    if any(part in ("", ".", "..") for part in parts) or posixpath.normpath(path) != path:
        raise InputError(
            f"{argument}={path!r}: write the path without '.', '..', '//' or a trailing '/'; "
            f"it must name a file under the log roots of host {host} plainly"
        )
    if not roots:
        raise InputError(
            f"{argument}={path!r}: host {host} lists no log_roots, so no file there may be read by path; "
            f"add log_roots = [\"/dir/of/logs\"] under [hosts.{host}] in the fleet config, or name a service"
        )
    for root in roots:
        base = root.rstrip("/")
        if path.startswith(base + "/"):
            return path
    listed = ", ".join(roots)
    raise InputError(
        f"{argument}={path!r} is outside the log roots of host {host} ({listed}); add its directory to "
        f"[hosts.{host}] log_roots in the fleet config, or name a service instead"
    )


def check_boot(boot: int) -> int:
    if isinstance(boot, bool) or not isinstance(boot, int) or boot == 0 or abs(boot) > MAX_BOOT:
        raise InputError(f"boot={boot!r}: give -1 (newest), -2, ... or 1 (oldest), 2, ...; never 0")
    return boot


# ---------------------------------------------------------------------------------------
# The command template

# The keywords travel as grep patterns (-e each) and as one awk variable split on '|'.
if any(not k or "|" in k or "\\" in k or "\n" in k for k in KEYWORDS):
    # The awk variable goes through awk's escape processing and a split on '|'.
    raise RuntimeError("ledger.KEYWORDS: a keyword holding '|', '\\' or a newline needs another separator here")
_GREP_KEYWORDS = " ".join(f"-e {shlex.quote(k)}" for k in KEYWORDS)
_AWK_KEYWORDS = shlex.quote("|".join(KEYWORDS))

# Numbers leave awk through printf "%.0f": mawk prints integers past 2^31 as 2.1e+09 otherwise.

# The cutter: grep's numbered phrase lines in ("num:text", or "num:offset:text" with withoff=1),
# the chosen boot's lines out, numbered as in the log, with its B, K (and R when known) lines.
# Boots start at marker lines; without any (and marks=0), at runs of echoed flags, else one
# boot: the rules of ledger._boot_starts. A summary for the shell goes to fd 3:
#   ok <boots> <boot> <first line> <last line, or -1: not known here> <count from: offset line>
#   | back | range | stale
# bl, bo, bi: line, byte and boot counts before the input's first line (a pass from an anchor);
# the newest marker seen becomes the next read's anchor (a C line), unless nocp=1. With cont=1
# the input continues boot bi+1 (from its marker at c_off, line first0) where the last read stopped.
# sent: the input ends with a line of the nonce and a status (podman's exit status; 0 after a
# file's bytes), alone or glued to a last line without newline: its number gives the last line.
# cb: the C line's numbering, '-' (the file's) or the byte offset line 1 and boot 1 count from.
_CUT_AWK = r"""
function iskw(t,  j) { for (j = 1; j <= nk; j++) if (index(t, K[j])) return 1; return 0 }
function summary(s) { print s > "/dev/fd/3" }
BEGIN { nk = split(kws, K, "|"); prev = -2; total += 0; bl += 0; bo += 0; bi += 0; seen += 0; rec = 0 }
{
  c = index($0, ":"); num = substr($0, 1, c - 1) + bl; t = substr($0, c + 1); off = -1
  if (withoff) { c = index(t, ":"); off = substr(t, 1, c - 1) + bo; t = substr(t, c + 1); if (off >= lim) exit }
  # From an anchor, the first line must be the marker line of the anchor, byte for byte, where it was.
  if (anchored && !rec++ && (off != bo || t != ENVIRON["rm_anchor"])) { stale = 1; exit }
  if (sent != "" && (pos = index(t, sent))) {
    # The end line: alone if the log ended with a newline, else glued to its last line.
    st = substr(t, pos + length(sent)) + 0; got = 1
    if (pos == 1) { total = num - 1; next }
    total = num; t = substr(t, 1, pos - 1)
  }
  if (!iskw(t)) { if (index(t, "Error")) err = t; next }
  if (length(t) > max) { skip++; next }
  n++; N[n] = num; T[n] = t
  if (index(t, mk)) { M[++nm] = n; MO[nm] = off; MW[nm] = length(t) + 1 }
  u = t; gsub(/\033\[[0-9;?]*[ -\/]*[@-~]/, "", u); sub(/\r$/, "", u)
  if (u ~ /(^|[ \t])I[ \t]+--[a-z][a-z0-9-]*[ \t]+[^ \t]+[ \t]*$/) {
    if (num != prev + 1) F[++nf] = n
    prev = num
  }
}
END {
  if (stale || (anchored && !rec)) { summary("stale"); exit }
  if (sent != "" && (!got || st != 0)) {
    printf "#%s X %s podman %.0f\n", nn, i, (got ? st : -1)
    if (err != "") printf "#%s E %s %s\n", nn, i, err
    summary("podman"); exit
  }
  if (cont) { cnt = nm + 1; B[1] = 1; for (j = 1; j <= nm; j++) B[j + 1] = M[j] }
  else if (nm) { cnt = nm; for (j = 1; j <= nm; j++) B[j] = M[j] }
  else if (nf && !marks) { cnt = nf; for (j = 1; j <= nf; j++) B[j] = F[j] }
  else if (n && !marks) { cnt = 1; B[1] = 1 }
  else { if (!marks) printf "#%s X %s nophrase\n", nn, i; summary("none"); exit }
  tot = bi + cnt
  p = (k > 0) ? k : tot + 1 + k
  if (nm && marks && !nocp && length(T[M[nm]]) <= 4096)
    printf "#%s C %s %s %.0f %.0f %.0f %s %s\n", nn, i, ino, MO[nm], N[M[nm]], tot, cb, T[M[nm]]
  else if (cont)
    printf "#%s C %s %s %.0f %.0f %.0f %s %s\n", nn, i, ino, c_off, first0, tot, cb, ENVIRON["rm_anchor"]
  if (p < 1 || p > tot) {
    if (!marks) printf "#%s X %s range %.0f\n", nn, i, tot
    summary(sprintf("range %.0f %.0f", tot, p)); exit
  }
  if (p <= bi) { summary(sprintf("back %.0f %.0f", tot, p)); exit }
  j = p - bi
  e = (j < cnt) ? B[j + 1] - 1 : n
  first = (cont && j == 1) ? first0 : (nm || nf) ? N[B[j]] : 1
  last = (j < cnt) ? N[B[j + 1]] - 1 : ((total > 0 || sent != "") ? total : -1)
  printf "#%s B %s %.0f %.0f\n", nn, i, p, (seen > 0 ? seen : tot)
  # T: these lines continue the boot the last read cut (its lines before here are known).
  if (cont && j == 1) printf "#%s T %s\n", nn, i
  for (x = B[j]; x <= e; x++) print N[x] ":" T[x]
  printf "#%s K %s %.0f\n", nn, i, skip
  if (last >= 0) printf "#%s R %s %.0f %.0f\n", nn, i, first, last
  # Where the lines of this boot can be counted from, if the shell is to count them.
  if (cont && j == 1) from = sprintf("%.0f %.0f", bo, bl + 1)
  else from = sprintf("%.0f %.0f", (nm ? MO[j - cont] : -1), first)
  summary(sprintf("ok %.0f %.0f %.0f %.0f %s", tot, p, first, last, from))
}
"""

# One pass over the whole file for the markers: "line:offset:text" in; the chosen boot's place out:
#   ok <boots> <boot> <offset> <line> <end offset> <next marker's line or -1>
# and the newest marker, the next read's anchor, as a C line.
_MARKS_AWK = r"""
{ c = index($0, ":"); ln = substr($0, 1, c - 1) + 0; t = substr($0, c + 1)
  c = index(t, ":"); off = substr(t, 1, c - 1) + 0; t = substr(t, c + 1)
  if (off >= s) exit
  m++; L[m] = ln; O[m] = off; last = t }
END {
  if (m == 0) { print "none"; exit }
  if (length(last) <= 4096) printf "#%s C %s %s %.0f %.0f %.0f - %s\n", nn, i, ino, O[m], L[m], m, last > "/dev/fd/4"
  p = (k > 0) ? k : m + 1 + k
  if (p < 1 || p > m) { printf "range %.0f\n", m; exit }
  printf "ok %.0f %.0f %.0f %.0f %.0f %.0f\n", m, p, O[p], L[p], (p < m ? O[p + 1] : s), (p < m ? L[p + 1] : -1)
}
"""

# Markers in a window before the anchor: "offset:text" lines in; the need-th before the anchor out.
_BACK_AWK = r"""
{ c = index($0, ":"); o = substr($0, 1, c - 1) + 0
  if (st > 0 && o == 0) next
  n++; O[n] = o + st }
END {
  if (n < need) { print "more"; exit }
  j = n - need + 1; e = (need > 1) ? O[j + 1] : a
  printf "ok %.0f %.0f\n", O[j], e
}
"""

# Markers in one chunk of the search back from the end (rm_last): "offset:text" lines in (grep -b
# on the bytes from st); the markers whose lines start in (st, hi] (or [0, hi] when st = 0) are new.
# With have markers found after hi, the oldest at nx: "ok <offset> <next marker's offset, or s>" for
# the need-th from the end; "all <n>" when the file start is reached with fewer; else
# "more <markers found> <the oldest one's offset>".
_LAST_AWK = r"""
{ c = index($0, ":"); o = substr($0, 1, c - 1) + st
  if ((o > st || st == 0) && o <= hi) { n++; O[n] = o } }
END {
  O[n + 1] = nx
  if (have + n >= need) { j = n - (need - have) + 1; printf "ok %.0f %.0f\n", O[j], O[j + 1]; exit }
  if (st == 0) { printf "all %.0f\n", have + n; exit }
  printf "more %.0f %.0f\n", have + n, (n ? O[1] : nx)
}
"""

if "'" in _CUT_AWK + _MARKS_AWK + _BACK_AWK + _LAST_AWK:
    raise RuntimeError("the awk programs sit in single quotes in the sh program: no ' inside")

# The host-side check of every file a program reads or runs (section $i): sets r to the real
# path of $1 when that is a readable regular file under one of the roots $2...; else writes
# the X line that says why and fails.
_REAL_SH = r"""
rm_real() {
  f=$1; shift
  if [ ! -e "$f" ]; then rm_ctl X "$i" missing; return 1; fi
  # Security: resolve symlinks and '..' here, on the host, and require the real path under
  # a root: a symlink planted in a log directory cannot lead a read out of it.
  r=$(readlink -f -- "$f") || { rm_ctl X "$i" outside; return 1; }
  # (A resolved path that starts with the root as written lies in it: it has no symlink left.)
  ok=
  for root do
    case $r in "${root%/}"/*) ok=1; break ;; esac
    rr=$(readlink -f -- "$root") || continue
    case $r in "${rr%/}"/*) ok=1; break ;; esac
  done
  if [ -z "$ok" ]; then rm_ctl X "$i" outside; return 1; fi
  if [ ! -f "$r" ]; then rm_ctl X "$i" notfile; return 1; fi
  if [ ! -r "$r" ]; then rm_ctl X "$i" unreadable; return 1; fi
}
"""

# The program: fixed text; only the call lines after it carry arguments, each quoted.
# Files are only ever named in redirections and after '--', never where a tool reads options.
# fd 4 is the command's stdout; the cutter's summary comes back to the shell on fd 3.
_PROGRAM = f"""\
export LC_ALL=C
# No pathname expansion: words split from a command's output are never globbed against files.
set -f
exec 4>&1
rm_ctl() {{ printf '#%s %s\\n' "$rm_n" "$*"; }}
{_REAL_SH}
rm_kw() {{ grep -a -n "$@" -F {_GREP_KEYWORDS}; }}
rm_cut_awk='{_CUT_AWK}'
rm_marks_awk='{_MARKS_AWK}'
rm_back_awk='{_BACK_AWK}'
rm_last_awk='{_LAST_AWK}'
rm_cut() {{
  rm_anchor="$rm_anchor" awk -v kws={_AWK_KEYWORDS} -v mk="$rm_mk" -v max={MAX_LINE_BYTES} -v nn="$rm_n" \\
    -v i="$i" -v k="$k" -v ino="$ino" -v cb="$rm_cb" "$@" "$rm_cut_awk" 3>&1 1>&4
}}
# How many lines the bytes [$1, $2) hold ($1 a line start, $2 > $1): the newlines before the
# last byte, plus the last line, ended by a newline or not.
rm_lines() {{ echo $(($(tail -c +$(($1 + 1)) < "$r" | head -c $(($2 - $1 - 1)) | wc -l) + 1)); }}
# The need-th marker before the anchor, by windows growing 8x back from it; sets M E L.
# (st > 0 always: a hit at the window's first byte may be the tail of a longer line, skipped.)
rm_back() {{
  need=$1 w=4194304
  while :; do
    # A window reaching the start costs more than the one plain pass the caller falls back to.
    if [ "$w" -ge "$a_off" ]; then return 1; fi
    st=$((a_off - w))
    set -- $(tail -c +$((st + 1)) < "$r" | head -c $((a_off - st)) | grep -a -b -F -e "$rm_mk" |
      awk -v st="$st" -v need="$need" -v a="$a_off" "$rm_back_awk")
    if [ "${{1-}}" = ok ]; then
      M=$2 E=$3
      L=$((a_line - $(tail -c +$((M + 1)) < "$r" | head -c $((a_off - M)) | wc -l)))
      return 0
    fi
    w=$((w * 8))
  done
}}
# The phrase lines of boot $4 (of $5), the bytes [$1, $2) from its marker on line $3; $6 0 if the
# cutter is to send the boot's marker as the next read's anchor. A line of the nonce follows the
# bytes (glued to the last line if that has no newline): its number gives the boot's last line,
# so its lines are counted in the same pass (the cutter sends the R line).
rm_range() {{
  rm_sum=$({{ tail -c +$(($1 + 1)) < "$r" | head -c $(($2 - $1)); printf '#%s P 0\\n' "$rm_n"; }} |
    rm_kw -b -e "#$rm_n P " |
    rm_cut -v withoff=1 -v lim=$(($2 + 1)) -v bo="$1" -v bl=$(($3 - 1)) -v bi=$(($4 - 1)) -v k="$4" -v seen="$5" \\
      -v marks=1 -v nocp="${{6-1}}" -v sent="#$rm_n P ")
  set -- "$1" "$2" "$3" "$4" "$5" "${{6-1}}" $rm_sum
  if [ "$4" -eq "$5" ] && [ "$2" -eq "$s" ] && [ "${{7-}}" = ok ]; then rm_tail "${{11}}"; fi
}}
# The next read's start: the start of the last line (s - 1 ends it: s; else a window back finds
# it), with the checksum of the 4 KiB before it, which the next read checks are unchanged.
rm_tail() {{
  if [ -z "$(tail -c +"$s" < "$r" | head -c 1)" ]; then u=$s ul=$(($1 + 1))
  else
    ws=$((s > 65536 ? s - 65536 : 0)) ul=$1
    u=$(tail -c +$((ws + 1)) < "$r" | head -c $((s - ws)) |
      awk -v ws="$ws" '{{ st = pos; pos += length($0) + 1 }} END {{ if (NR > 1 || ws == 0) printf "%.0f", ws + st }}')
  fi
  if [ -n "$u" ] && [ "$u" -gt 0 ]; then
    uw=$((u > 4096 ? 4096 : u))
    rm_ctl U "$i" "$u" "$ul" "$(tail -c +$((u - uw + 1)) < "$r" | head -c "$uw" | cksum)"
  fi
}}
# The whole file, [0, s), in one pass: the cutter finds its boots by the rules of ledger._boot_starts
# (markers, else runs of echoed flags, else one boot); the nonce line after the bytes gives the last
# line's number.
rm_whole() {{
  rm_sum=$({{ head -c "$s" < "$r"; printf '#%s P 0\\n' "$rm_n"; }} | rm_kw -b -e "#$rm_n P " |
    rm_cut -v withoff=1 -v lim=$((s + 1)) -v marks=0 -v sent="#$rm_n P ")
}}
# Boot -$1 (1: the newest) found from the end of the file: chunks of 1 MiB, 2 MiB, 4 MiB, ... back
# from byte s (the size when the read began), each grepped for markers, until $1 are found. A chunk
# [st, hi) runs on past hi by the longest line a marker may be on (rm_ov bytes), so a marker line
# that starts in it is seen whole even when the marker itself lies past hi; only line starts in
# (st, hi] count (the chunk's first line may be the tail of a longer one, unless st = 0). A boot of
# B bytes costs under 2 B of grep plus the cut of its own bytes; the file before it is not read.
# The lines before the boot are counted (exact line numbers and boot index) only when they are
# at most rm_cmax bytes; past that the boot's lines count from 1 at its marker, whose byte offset
# an O line gives, and the index is -$1. Fails (status 1) when the file holds no marker at all.
rm_last() {{
  need=$1 w=1048576 hi=$s have=0 nx=$s
  while :; do
    st=$((hi > w ? hi - w : 0))
    en=$((hi + rm_ov < s ? hi + rm_ov : s))
    # have: markers found after hi so far; nx: the oldest of them (or s).
    set -- $(tail -c +$((st + 1)) < "$r" | head -c $((en - st)) | grep -a -b -F -e "$rm_mk" |
      awk -v st="$st" -v hi="$hi" -v have="$have" -v need="$need" -v nx="$nx" "$rm_last_awk")
    case ${{1-}} in
      ok) break ;;
      all) if [ "$2" -eq 0 ]; then return 1; fi; rm_ctl X "$i" range "$2"; return 0 ;;
      more) have=$2 nx=$3 hi=$st w=$((w * 2)) ;;
      *) rm_ctl X "$i" failed; return 0 ;;
    esac
  done
  M=$2 E=$3 rm_cb=-
  # nocp=0 for the newest boot: its marker is the next read's anchor.
  cp=$((need > 1))
  if [ "$M" -le "$rm_cmax" ]; then
    # [0, M) ends with a newline (M starts a line): wc -l counts the lines before the boot.
    L=$(($(head -c "$M" < "$r" | wc -l) + 1))
    b=$(($(head -c "$M" < "$r" | grep -c -a -F -e "$rm_mk") + 1))
    rm_range "$M" "$E" "$L" "$b" $((b + need - 1)) "$cp"
  else
    rm_ctl O "$i" "$M" "$need"
    rm_cb=$M
    rm_range "$M" "$E" 1 1 1 "$cp"
  fi
}}
# Section $1: boot $2 of file $3 (its real path under the roots ${{13}}...), from the last read's
# checkpoint $4-$12 ('-' each when there is none): inode, the anchor marker's offset, line, boot
# and length, where the last read stopped (offset, line, cksum of the 4 KiB before), and the byte
# offset line numbers count from when the lines before it were not counted ('-': from the file's start).
rm_file() {{
  i=$1 k=$2 f=$3 c_ino=$4 c_off=$5 c_line=$6 c_idx=$7 c_len=$8 t_off=$9 t_line=${{10}} t_sum=${{11}} c_base=${{12}}
  shift 12
  # The numbering the cutter's C line states: the file's own ('-') unless set below.
  rm_cb=-
  rm_ctl S "$i"
  rm_real "$f" "$@" || return
  # One ls gives the inode (is it still the same file?) and the size the read stops at.
  set -- $(ls -dinL -- "$r")
  if [ -z "${{6-}}" ]; then rm_ctl X "$i" unreadable; return; fi
  ino=$1 s=$6
  if [ "$s" -eq 0 ]; then rm_ctl X "$i" empty; return; fi
  # A small file is cut in one pass, whatever the last read left: fewer processes than checking it.
  if [ "$s" -le "$rm_small" ]; then rm_whole; return; fi
  # The anchor: the newest boot marker the last read found. If its line is still there, byte
  # for byte, one pass reads only the bytes after it (and, for an older boot, a window before).
  # (An anchor whose lines count from it serves only boots counted from the end.)
  if [ "$c_ino" = "$ino" ] && [ "$c_off" != - ] && [ "$c_off" -lt "$s" ] &&
     {{ [ "$c_base" = - ] || [ "$k" -lt 0 ]; }}; then
    a_off=$c_off a_line=$c_line rm_cb=$c_base
    t_w=0
    if [ "$t_off" != - ]; then t_w=$((t_off > 4096 ? 4096 : t_off)); fi
    if [ "$t_off" != - ] && [ "$t_off" -le "$s" ] &&
       [ "$(tail -c +$((c_off + 1)) < "$r" | head -c "$c_len")" = "$rm_anchor" ] &&
       [ "$(tail -c +$((t_off - t_w + 1)) < "$r" | head -c "$t_w" | cksum)" = "$t_sum" ]; then
      # The anchor and the bytes before t_off are as the last read left them: only what follows is new.
      # Nothing follows, and the newest boot is asked for: the last answer stands (an N line).
      if [ "$t_off" -eq "$s" ] && [ "$k" -eq -1 ]; then rm_ctl N "$i"; return; fi
      set -- $(tail -c +$((t_off + 1)) < "$r" | rm_kw -b | rm_cut -v withoff=1 -v lim="$s" -v bo="$t_off" \\
        -v bl=$((t_line - 1)) -v bi=$((c_idx - 1)) -v marks=1 -v cont=1 -v first0="$c_line" -v c_off="$c_off")
    else
      set -- $(tail -c +$((a_off + 1)) < "$r" | rm_kw -b | rm_cut -v withoff=1 -v lim="$s" -v bo="$a_off" \\
        -v bl=$((a_line - 1)) -v bi=$((c_idx - 1)) -v marks=1 -v anchored=1)
    fi
    case ${{1-}} in
      ok)
        if [ "$5" -ge 0 ]; then last=$5
        elif [ "$6" -lt "$s" ]; then last=$(($7 - 1 + $(rm_lines "$6" "$s")))
        else last=$(($7 - 1)); fi
        rm_ctl R "$i" "$4" "$last"
        if [ "$c_base" != - ]; then rm_ctl O "$i" "$c_base" $((-k)); fi
        if [ "$3" -eq "$2" ]; then rm_tail "$last"; fi
        return ;;
      # Lines counted from the anchor: a boot before it is searched for from the end.
      range) if [ "$c_base" = - ]; then rm_ctl X "$i" range "$2"; return; fi ;;
      back)
        # A boot before the anchor: a window back from it when it is near, else the plain pass.
        if [ "$3" -gt $((c_idx / 2)) ] && rm_back $((c_idx - $3)); then
          rm_range "$M" "$E" "$L" "$3" "$2"
          if [ "$c_base" != - ]; then rm_ctl O "$i" "$c_base" $((-k)); fi
          return
        fi ;;
    esac
  fi
  if [ "$k" -lt 0 ]; then
    rm_last $((-k)) && return
  else
    # A boot counted from the start: one pass over the file numbers every boot marker, then
    # only the chosen boot is read.
    set -- $(grep -a -n -b -F -e "$rm_mk" < "$r" |
      awk -v k="$k" -v s="$s" -v nn="$rm_n" -v i="$i" -v ino="$ino" "$rm_marks_awk")
    case ${{1-}} in
      ok) rm_range "$4" "$6" "$5" "$3" "$2"; return ;;
      range) rm_ctl X "$i" range "$2"; return ;;
    esac
  fi
  # No boot marker in the file: boots start at runs of echoed flags (ledger._boot_starts).
  rm_whole
}}
rm_podman() {{
  i=$1 k=$2 c=$3 ino=-
  rm_ctl S "$i"
  if ! command -v podman > /dev/null 2>&1; then rm_ctl X "$i" nopodman; return; fi
  rm_sum=$({{ $rm_t podman logs -- "$c" 2>&1; printf '#%s P %s\\n' "$rm_n" "$?"; }} |
    rm_kw -e "#$rm_n P " -e Error | rm_cut -v withoff=0 -v sent="#$rm_n P " -v marks=0)
}}
"""


def _strip_comments(program: str) -> str:
    """The program without its comment lines: they are for the reader of this file, not the host."""
    return "\n".join(line for line in program.splitlines() if not line.lstrip().startswith("# "))


_PROGRAM_SENT = _strip_comments(_PROGRAM)


REMOTE_COMMAND = "exec /bin/sh -s"
"""The only command line a host's login shell is given; the program arrives on its stdin.

Any login shell (bash, zsh, fish, tcsh) runs this line alike, and the program, which only
/bin/sh interprets, never goes through the login shell's quoting rules (nor into `ps`).
"""


@dataclass(frozen=True)
class Checkpoint:
    """Where the last read of a file found its boot marker, so the next read scans from there."""

    inode: str
    offset: int
    """Byte offset of the marker line: the read after this one starts its pass here."""
    line: int
    boot: int
    text: str
    """The marker line as the host has it: the next read checks it is still there, unchanged."""
    tail_offset: int | None = None
    """Where the last read of this (the newest) boot stopped: a line start; the next read goes on there."""
    tail_line: int | None = None
    tail_cksum: str = ""
    """cksum of the 4 KiB before tail_offset: the next read checks they are unchanged."""
    lines: tuple[Line, ...] = ()
    """The boot's phrase lines before tail_line, as the last read cut them."""
    skipped: int = 0
    base: int | None = None
    """None: line numbers (line, tail_line, lines) are the file's. Else they count from 1 at the line
    that starts at this byte offset, and boot counts from 1 at the boot that holds it."""


@dataclass(frozen=True)
class LogRequest:
    kind: Literal["file", "podman"]
    name: str
    """The file's path or the container's name, already checked."""
    boot: int
    label: str
    roots: tuple[str, ...] = ()
    """Files: the directories the real path must lie under, checked on the host."""


@dataclass(frozen=True)
class CutBoot:
    """One boot as the host cut it out: its phrase lines, numbered as in the log."""

    index: int
    boots_seen: int | None
    lines: tuple[Line, ...]
    skipped_long_lines: int
    first_line: int
    last_line: int
    """The boot's whole span in the log, lines without a phrase included."""
    lines_from_byte: int | None = None
    """None: line numbers are the file's and index counts from its first boot. Else the lines before
    were not counted: line numbers count from 1 at the line that starts at this byte offset (line n
    is `tail -c +<offset + 1> FILE | sed -n <n>p`), index counts from the end (-1 the newest) and
    boots_seen is None."""


def build_command(
    requests: Sequence[LogRequest], *, nonce: str, checkpoints: Sequence[Checkpoint | None], timeout_s: float,
    count_before_bytes: int = Limits.count_before_bytes, small_file_bytes: int = Limits.small_file_bytes,
) -> str:
    """The whole command: the fixed program, then one quoted call per request."""
    if not re.fullmatch(r"[0-9a-f]{16,64}", nonce):
        raise ValueError("the nonce is hex")
    q = shlex.quote
    kill_after_s = math.ceil(timeout_s) + 2
    lines = [
        _PROGRAM_SENT,
        f"rm_n={nonce}",
        f"rm_mk={q(BOOT_MARKER)}",
        f"rm_cmax={int(count_before_bytes)}",
        f"rm_ov={MAX_LINE_BYTES + 1}",
        f"rm_small={int(small_file_bytes)}",
        # A hung `podman logs` is killed on the host too, so no stuck process stays behind.
        f"if command -v timeout > /dev/null 2>&1; then rm_t='timeout -s KILL {kill_after_s}'; else rm_t=; fi",
    ]
    for i, (request, checkpoint) in enumerate(zip(requests, checkpoints, strict=True)):
        boot = check_boot(request.boot)
        if request.kind == "podman":
            lines.append(f"rm_podman {i} {boot} {q(check_container(request.name))}")
            continue
        if checkpoint is None or "\x00" in checkpoint.text or "\n" in checkpoint.text:
            resume, anchor = ["-"] * 9, ""
        else:
            resume = [checkpoint.inode, str(checkpoint.offset), str(checkpoint.line), str(checkpoint.boot),
                      str(len(checkpoint.text.encode())), *_tail_words(checkpoint),
                      "-" if checkpoint.base is None else str(checkpoint.base)]
            anchor = checkpoint.text
        words = [str(i), str(boot), _sent_path(request.name), *resume, *(_sent_path(r) for r in request.roots)]
        # The anchor's text reaches awk through the environment (no escape processing), quoted.
        lines.append(f"rm_anchor={q(anchor)}")
        lines.append("rm_file " + " ".join(q(w) for w in words))
    lines.append("rm_ctl Z")
    # One compound command: sh reads all of it before running any, and nothing the program
    # runs can read the rest of the script from stdin.
    return "{\n" + "\n".join(lines) + "\n} < /dev/null\n"


def _tail_words(checkpoint: Checkpoint) -> list[str]:
    if checkpoint.tail_offset is None or checkpoint.tail_line is None or not checkpoint.tail_cksum:
        return ["-", "-", "-"]
    return [str(checkpoint.tail_offset), str(checkpoint.tail_line), checkpoint.tail_cksum]


_CHECKPOINT_FIELDS = re.compile(r"(\d+) (\d+) (\d+) (\d+) (-|\d+) (.+)")
_TAIL_FIELDS = re.compile(r"(\d+) (\d+) (\d+ \d+)")


@dataclass
class _Section:
    lines: list[Line] = field(default_factory=list)
    index: int | None = None
    boots_seen: int | None = None
    skipped: int | None = None
    error: list[str] | None = None
    podman_error: str = ""
    checkpoint: Checkpoint | None = None
    span: tuple[int, int] | None = None
    continued: bool = False
    tail: tuple[int, int, str] | None = None
    base: tuple[int, int] | None = None
    """(offset, n): line numbers count from the line at offset; the boot is the n-th from the end."""
    failure: str = ""
    """Set when the answer cannot be used (the message)."""
    unchanged: bool = False


def parse_output(raw: bytes, *, nonce: str, count: int) -> tuple[list[_Section], bool]:
    """Split the command's output into its sections; True if the end marker arrived."""
    prefix = f"#{nonce} "
    sections = [_Section() for _ in range(count)]
    current: _Section | None = None
    finished = False
    for text in raw.decode("utf-8", "replace").split("\n"):
        if text.startswith(prefix):
            kind, _, rest = text[len(prefix):].partition(" ")
            if kind == "Z":
                finished = True
                continue
            number, _, rest = rest.partition(" ")
            if not number.isdigit() or int(number) >= count:
                continue
            section = sections[int(number)]
            if kind == "S":
                current = section
            elif kind == "B":
                index, _, seen = rest.partition(" ")
                section.index, section.boots_seen = int(index), int(seen)
            elif kind == "K":
                section.skipped = int(rest or 0)
            elif kind == "T":
                section.continued = True
            elif kind == "N":
                section.unchanged = True
            elif kind == "O":
                offset, _, need = rest.partition(" ")
                if offset.isdigit() and need.isdigit():  # digits only: the offset goes back into the next command
                    section.base = (int(offset), int(need))
            elif kind == "U":
                found_tail = _TAIL_FIELDS.fullmatch(rest)
                if found_tail:  # digits only: they go back into the next command
                    section.tail = (int(found_tail[1]), int(found_tail[2]), found_tail[3])
            elif kind == "R":
                first, _, last = rest.partition(" ")
                if first.isdigit() and last.isdigit():
                    section.span = (int(first), int(last))
            elif kind == "X":
                section.error = rest.split(" ")
            elif kind == "E":
                section.podman_error = rest
            elif kind == "C":
                # Security: this came from the host and goes back into the next command:
                # plain digits, and a marker line that is quoted there and compared, never run.
                found = _CHECKPOINT_FIELDS.fullmatch(rest)
                if found:
                    inode, offset, line, boot, base, marker = found.groups()
                    if BOOT_MARKER in marker and "\x00" not in marker and "\ufffd" not in marker:
                        section.checkpoint = Checkpoint(inode, int(offset), int(line), int(boot), marker,
                                                        base=None if base == "-" else int(base))
        elif current is not None:
            number, sep, body = text.partition(":")
            if sep and number.isdigit():
                current.lines.append(Line(int(number), clean(body)))
    return sections, finished


def section_boot(section: _Section, request: LogRequest, host: str) -> CutBoot:
    """The section's boot, or the error its code names (input, rule and remedy)."""
    label = request.label
    if section.failure:
        raise RemoteError(section.failure)
    if section.error:
        code, *args = section.error
        _refuse_file(code, label, request.roots, host)
        if code == "empty":
            raise LedgerError(f"{label}: the log is empty; nothing was booted or the wrong file was named")
        if code == "nophrase":
            raise LedgerError(f"{label}: no radiance ledger phrase in the log; point the tool at the boot log")
        if code == "range" and args and args[0].isdigit():
            select_boot(request.boot, int(args[0]), label)  # raises the reader's own wording
        if code == "nopodman":
            raise SourceError(f"{label}: podman is not on the PATH of the SSH user on host {host}; "
                              "install it, or log in as the user that runs the container")
        if code == "podman":
            status = args[0] if args else "?"
            said = f": {section.podman_error.strip()[:300]!r}" if section.podman_error else ""
            why = ("it was killed after the time limit" if status in ("137", "124") else
                   "it could not be run to its end" if status == "-1" else f"it exited with status {status}")
            raise SourceError(
                f"{label}: `podman logs {request.name}` failed on host {host}: {why}{said}; check the name "
                "with `podman ps -a` on the host, as the SSH user"
            )
        raise RemoteError(f"{label}: the ledger command failed on host {host} ({' '.join(section.error)}); "
                          "the host needs POSIX sh, grep, awk and coreutils (readlink -f, head -c, tail -c)")
    if section.index is None or section.boots_seen is None or section.skipped is None or section.span is None:
        raise RemoteError(f"{label}: host {host} sent an incomplete answer; try again")
    first, last = section.span
    if section.base is not None:
        offset, need = section.base
        return CutBoot(-need, None, tuple(section.lines), section.skipped, first, last, lines_from_byte=offset)
    return CutBoot(section.index, section.boots_seen, tuple(section.lines), section.skipped, first, last)


# ---------------------------------------------------------------------------------------
# The audit's templates: a serve script and its env file read, and two modes' dry runs.
# Same rules as the ledger read: fixed sh text on stdin, then one quoted call line per file
# or mode. A file's bytes, or a dry run's output, travel between a D (or W) line and a Y
# line of the nonce, so no byte of them can end the block early or pass for a control line:
#
#     #<n> S <i>                  section i begins
#     #<n> X <i> <code> [<n>]     section i failed: missing, outside, notfile, unreadable,
#                                 toolarge <bytes>, changed, notimeout, nobash
#     #<n> D <i> [<crc> <bytes>]  data follows (a file: with its cksum; a dry run: its stdout)
#     #<n> A <i> exec|bash        how the dry run's script was started (exec bit, or bash)
#     #<n> W <i>                  the end of the dry run's stderr follows, then "<n> <status>"
#     \n#<n> Y <i>                the block ends (the newline before it is not data)
#     #<n> Z                      the command ran to its end

_FILES_PROGRAM = r"""export LC_ALL=C
set -f
rm_ctl() { printf '#%s %s\n' "$rm_n" "$*"; }
""" + _REAL_SH + r"""
# File $3 as section $1 when it lies under the roots $4...: its cksum, then at most $2 + 1 of
# its bytes (one over the cap tells the reader it grew past it).
rm_read() {
  i=$1 cap=$2 f=$3
  shift 3
  rm_ctl S "$i"
  rm_real "$f" "$@" || return
  set -- $(ls -dinL -- "$r")
  if [ -z "${6-}" ]; then rm_ctl X "$i" unreadable; return; fi
  if [ "$6" -gt "$cap" ]; then rm_ctl X "$i" toolarge "$6"; return; fi
  # The cksum before the bytes: if the file changes between the two, the dry run refuses it.
  rm_ctl D "$i" $(cksum < "$r")
  head -c $((cap + 1)) < "$r"
  printf '\n#%s Y %s\n' "$rm_n" "$i"
}
"""

# fd 4 is the command's stdout. The dry run's stdout goes through head to fd 4 at once; its
# stderr, then its exit status, go through tail into a variable (fd 5) and follow as a W block.
# The script gets neither fd 3, 4 nor 5, nor the nonce (a shell variable, never exported).
_DRY_RUN_PROGRAM = r"""export LC_ALL=C
set -f
exec 4>&1
rm_ctl() { printf '#%s %s\n' "$rm_n" "$*"; }
""" + _REAL_SH + r"""
# '<script> <mode> --dry-run' as section $1: $2 the script, $3 its cksum when its text was
# checked, $4 the mode, $5... the roots the script's real path must lie under.
rm_dry() {
  i=$1 f=$2 sum=$3 m=$4
  shift 4
  rm_ctl S "$i"
  rm_real "$f" "$@" || return
  # Security: no dry run without a time limit on the host: a mode that ignores --dry-run and
  # starts the engine, or hangs, is killed there whatever becomes of the connection.
  if [ -z "$rm_t" ]; then rm_ctl X "$i" notimeout; return; fi
  # Security: the script run is the one whose text was checked (it handles --dry-run).
  if [ "$(cksum < "$r")" != "$sum" ]; then rm_ctl X "$i" changed; return; fi
  if [ -x "$r" ]; then set -- "$r"; rm_ctl A "$i" exec
  elif command -v bash > /dev/null 2>&1; then set -- bash "$r"; rm_ctl A "$i" bash
  else rm_ctl X "$i" nobash; return; fi
  rm_ctl D "$i"
  rm_e=$(
    {
      {
        { (cd -- "${r%/*}/" && exec $rm_t "$@" "$m" --dry-run) < /dev/null 2>&1 1>&3 3>&- 4>&- 5>&-
          printf '\n%s %s\n' "$rm_n" "$?"
        } | tail -c "$rm_errcap" >&5 3>&-
      } 3>&1 | head -c $((rm_cap + 1)) >&4 5>&-
    } 5>&1
  )
  printf '\n#%s Y %s\n' "$rm_n" "$i"
  rm_ctl W "$i"
  printf '%s' "$rm_e"
  printf '\n#%s Y %s\n' "$rm_n" "$i"
}
"""

_FILES_SENT = _strip_comments(_FILES_PROGRAM)
_DRY_RUN_SENT = _strip_comments(_DRY_RUN_PROGRAM)

STDERR_TAIL_BYTES = 2_048
"""The end of a dry run's stderr that comes back, for the message when it fails."""

MODE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
"""A serve script's mode name (use fullmatch): one plain word, never an option."""

_CKSUM = re.compile(r"[0-9]{1,20} [0-9]{1,20}")


def check_mode(mode: str) -> str:
    # Security: the mode becomes one argv word of the serve script. A leading '-' would make it
    # an option of the script ('--help', '-x'); blanks, quotes, '$', ';' or a newline have no
    # place in a mode name, so the pattern leaves nothing a shell or the script could misread.
    if not isinstance(mode, str) or not MODE_PATTERN.fullmatch(mode):
        raise InputError(
            f"mode={mode!r} is not a mode name: letters, digits, '.', '_', '+', '-' only, at most 64, not starting "
            "with '-'; check_serve_script lists the script's modes"
        )
    return mode


def _sent_path(text: str) -> str:
    """A path already checked by check_remote_path, checked again where it enters a command."""
    if not text.startswith("/") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise InputError(f"{text!r}: a remote path is absolute and holds no control characters")
    return text


@dataclass(frozen=True)
class FileRequest:
    """A script or env file to read on a host (path and roots already checked by check_remote_path)."""

    path: str
    roots: tuple[str, ...]
    argument: str
    """The tool argument (or config key) it came from: every message names it."""
    optional: bool = False
    """True: a missing file is no error (the .env beside a script, when none was named)."""


@dataclass(frozen=True)
class RemoteText:
    """A file's bytes as the host sent them, and its cksum there ("<crc> <bytes>")."""

    path: str
    data: bytes
    cksum: str


@dataclass(frozen=True)
class DryRun:
    """One '<script> <mode> --dry-run' on a host: its stdout (at most the cap + 1 bytes) and exit status."""

    mode: str
    command: tuple[str, ...]
    stdout: bytes
    exit_status: int | None
    """None: the status did not come back (a process the script left behind kept writing)."""
    stderr_tail: str
    timeout_s: int
    """The limit the host ran it under (`timeout -s KILL`)."""

    @property
    def killed(self) -> bool:
        """Killed by the host's time limit: timeout's SIGKILL (137), or its own 124."""
        return self.exit_status in (124, 137)


def build_files_command(requests: Sequence[FileRequest], *, nonce: str, cap_bytes: int) -> str:
    """Read each file (at most cap_bytes) on the host, all in one command."""
    if not re.fullmatch(r"[0-9a-f]{16,64}", nonce):
        raise ValueError("the nonce is hex")
    q = shlex.quote
    lines = [_FILES_SENT, f"rm_n={nonce}"]
    for i, request in enumerate(requests):
        words = [str(i), str(int(cap_bytes)), _sent_path(request.path), *(_sent_path(r) for r in request.roots)]
        lines.append("rm_read " + " ".join(q(w) for w in words))
    lines.append("rm_ctl Z")
    return "{\n" + "\n".join(lines) + "\n} < /dev/null\n"


def build_dry_run_command(
    script: str, cksum: str, modes: Sequence[str], roots: Sequence[str], *, nonce: str, timeout_s: float,
    cap_bytes: int,
) -> str:
    """'<script> <mode> --dry-run' for each mode, one after the other, in one command."""
    if not re.fullmatch(r"[0-9a-f]{16,64}", nonce):
        raise ValueError("the nonce is hex")
    # Security: the cksum came back from the host and goes into this command: digits only.
    if not _CKSUM.fullmatch(cksum):
        raise InputError(f"cksum={cksum!r}: expected '<crc> <bytes>' as cksum prints them; read the script again")
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s <= 3600):
        raise InputError(f"timeout_s={timeout_s!r}: give a number of seconds above 0 and at most 3600")
    q = shlex.quote
    lines = [
        _DRY_RUN_SENT,
        f"rm_n={nonce}",
        f"rm_cap={int(cap_bytes)}",
        f"rm_errcap={STDERR_TAIL_BYTES + 128}",
        f"if command -v timeout > /dev/null 2>&1; then rm_t='timeout -s KILL {math.ceil(timeout_s)}'; else rm_t=; fi",
    ]
    for i, mode in enumerate(modes):
        words = [str(i), _sent_path(script), cksum, check_mode(mode), *(_sent_path(r) for r in roots)]
        lines.append("rm_dry " + " ".join(q(w) for w in words))
    lines.append("rm_ctl Z")
    return "{\n" + "\n".join(lines) + "\n} < /dev/null\n"


@dataclass
class _Frame:
    fields: dict[str, list[str]] = field(default_factory=dict)
    blocks: dict[str, bytes] = field(default_factory=dict)


def parse_frames(raw: bytes, *, nonce: str, count: int) -> tuple[list[_Frame], bool]:
    """The control lines and data blocks of each section; True if the end marker arrived."""
    prefix = f"#{nonce} ".encode()
    frames = [_Frame() for _ in range(count)]
    finished = False
    position = 0
    while position < len(raw):
        end = raw.find(b"\n", position)
        end = len(raw) if end < 0 else end
        line, position = raw[position:end], end + 1
        if not line.startswith(prefix):
            continue
        kind, _, rest = line[len(prefix):].decode("ascii", "replace").partition(" ")
        if kind == "Z":
            finished = True
            continue
        number, _, rest = rest.partition(" ")
        if not number.isdigit() or int(number) >= count:
            continue
        frame = frames[int(number)]
        frame.fields[kind] = rest.split()
        if kind in ("D", "W"):
            closing = b"\n" + prefix + f"Y {number}\n".encode()
            stop = raw.find(closing, position)
            if stop < 0:
                break  # cut off inside the block: no Z follows, the caller says so
            frame.blocks[kind] = raw[position:stop]
            position = stop + len(closing)
    return frames, finished


def _refuse_file(code: str, label: str, roots: Sequence[str], host: str) -> None:
    """Raise what rm_real's code says about any file (a ledger, a script, an env file); else return."""
    if code == "missing":
        raise SourceError(f"{label}: no such file on host {host}; check the path (`ls -l` it there) or the fleet "
                          "config's entry")
    if code == "outside":
        raise InputError(
            f"{label}: the file's real path on host {host} (symlinks followed there) lies outside the allowed "
            f"log roots ({', '.join(roots)}); add its real directory to [hosts.{host}] log_roots in the fleet config"
        )
    if code == "notfile":
        raise SourceError(f"{label}: not a regular file on host {host} (a directory, FIFO or device); name the "
                          "file itself")
    if code == "unreadable":
        raise SourceError(f"{label}: permission denied on host {host}; the SSH user cannot read it (give it read "
                          "access, or set user = ... for the host in the fleet config)")


def _file_error(frame: _Frame, path: str, argument: str, roots: Sequence[str], host: str) -> None:
    """Raise what the section's X line says about a file (read or run), naming the argument and the remedy."""
    code, *args = frame.fields["X"] or ["?"]
    label = f"{argument}={path!r}"
    _refuse_file(code, label, roots, host)
    if code == "toolarge" and args and args[0].isdigit():
        raise SourceError(f"{label} on host {host} is {int(args[0]):,} bytes: over the cap, so not a serve script "
                          "or env file; name the right file")
    if code == "changed":
        raise SourceError(f"{label} on host {host} changed between the check of its text and the dry run, so it "
                          "was not run; run compare_dry_run again")
    if code == "notimeout":
        raise SourceError(f"{label}: host {host} has no `timeout` (coreutils) on the SSH user's PATH, and a dry run "
                          "is never started there without a time limit; install coreutils there, or paste the two "
                          "dry-run outputs as proven_argv and candidate_argv")
    if code == "nobash":
        raise SourceError(f"{label} on host {host} has no exec bit and there is no bash to run it with; chmod +x it")
    raise RemoteError(f"{label}: the command failed on host {host} ({' '.join(frame.fields['X'])}); the host needs "
                      "POSIX sh and coreutils (readlink -f, head -c, tail -c, cksum)")


def file_text(frame: _Frame, request: FileRequest, host: str, cap_bytes: int) -> RemoteText | None:
    """The file the section holds, None for an optional file that is not there, or the error."""
    if "X" in frame.fields:
        if request.optional and frame.fields["X"][:1] == ["missing"]:
            return None
        _file_error(frame, request.path, request.argument, request.roots, host)
    data = frame.blocks.get("D")
    cksum = " ".join(frame.fields.get("D", []))
    if data is None or not _CKSUM.fullmatch(cksum):
        raise RemoteError(f"{request.argument}={request.path!r}: host {host} sent an incomplete answer; try again")
    if len(data) > cap_bytes:
        raise SourceError(f"{request.argument}={request.path!r} on host {host} is over {cap_bytes // 1024:,} KiB: "
                          "not a serve script or env file; name the right file")
    return RemoteText(request.path, data, cksum)


def dry_run_result(frame: _Frame, mode: str, script: str, roots: Sequence[str], host: str,
                   *, nonce: str, timeout_s: int) -> DryRun:
    """The section's dry run (stdout, status, stderr's end), or the error its X line names."""
    if "X" in frame.fields:
        _file_error(frame, script, "script", roots, host)
    how = frame.fields.get("A", [])
    stdout, tail = frame.blocks.get("D"), frame.blocks.get("W")
    if how not in (["exec"], ["bash"]) or stdout is None or tail is None:
        raise RemoteError(f"script={script!r}: host {host} sent an incomplete answer for mode {mode!r}; try again")
    command = (script,) if how == ["exec"] else ("bash", script)
    err, _, last = tail.rstrip(b"\n").rpartition(b"\n")
    words = last.decode("ascii", "replace").split(" ")
    status = int(words[1]) if len(words) == 2 and words[0] == nonce and words[1].isdigit() else None
    text = (err if status is not None else tail).decode("utf-8", "replace")
    return DryRun(mode, (*command, mode, "--dry-run"), stdout, status, text[-STDERR_TAIL_BYTES:], timeout_s)


# ---------------------------------------------------------------------------------------
# Connections


class _OverCap(Exception):
    pass


@dataclass(frozen=True)
class Doing:
    """What a command does, as its messages say it: "reading <what>", "running <what>"."""

    verb: str
    what: str
    timeout_s: float

    def __str__(self) -> str:
        return f"{self.verb} {self.what}"


@dataclass
class _Entry:
    connect_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(8))
    conn: asyncssh.SSHClientConnection | None = None
    busy: int = 0
    idle: asyncio.TimerHandle | None = None


@dataclass
class Transfer:
    """Bytes of command text sent and of output received, summed over the pool's commands."""

    sent_bytes: int = 0
    received_bytes: int = 0
    commands: int = 0
    continued: int = 0
    """File reads that went on from where the last read stopped (only the bytes since)."""


_ReadKey = tuple[SSHTarget, str, str, int, tuple[str, ...]]
"""What makes two log reads the same read: host entry, kind, path or container, boot, roots."""

MAX_BATCH = 4
"""Logs read in one command at most. The host runs a command's reads one after the other; more logs
go as further commands on the same connection, which the host runs side by side (at most
Limits.channels_per_host at once)."""


@dataclass(eq=False)  # compared and hashed by identity
class _Batch:
    """Log reads of one host entry that go to the host as one command."""

    target: SSHTarget
    requests: list[LogRequest] = field(default_factory=list)
    keys: list[_ReadKey] = field(default_factory=list)
    task: asyncio.Task[list[_Section]] = field(init=False)
    waiters: int = 0


MAX_CHECKPOINTS = 256
"""Logs whose last read is remembered (a few KiB each); the least recently read go first."""


class SSHPool:
    """SSH connections, one per host entry, reused across tool calls and closed when idle."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.checkpoints: dict[tuple[SSHTarget, str], Checkpoint] = {}
        self.transfer = Transfer()
        self._entries: dict[SSHTarget, _Entry] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[SSHTarget, _Batch] = {}
        """Per host entry, the batch that calls of this loop turn join (its command not yet sent)."""
        self._inflight: dict[_ReadKey, tuple[_Batch, int]] = {}
        """Each read waiting or running, and where its answer will be."""

    # -- public ------------------------------------------------------------------------

    async def read_logs(self, target: SSHTarget, requests: Sequence[LogRequest]) -> list[CutBoot]:
        """Cut the requested boot of each log on the host, in one command with the host's other reads.

        Fan-out: the reads of every call that reaches here in the same turn of the event loop
        (many services read at once, say) go to the host together, MAX_BATCH logs per command,
        the commands side by side on the one connection; a read identical to one already
        waiting or running (same log or container, boot and roots) is not sent again, it shares
        that read's answer (so it may miss lines written after that read began). A command is
        stopped only when every call waiting on it is cancelled.
        """
        places = [self._enlist(target, request) for request in requests]
        batches = list(dict.fromkeys(batch for batch, _ in places))
        for batch in batches:
            batch.waiters += 1
        try:
            answers = {batch: await asyncio.shield(batch.task) for batch in batches}
        finally:
            for batch in batches:
                batch.waiters -= 1
                if batch.waiters == 0 and not batch.task.done():
                    batch.task.cancel()  # no call waits for it any more: stop the command
        return [section_boot(answers[batch][position], request, target.name)
                for (batch, position), request in zip(places, requests, strict=True)]

    def _enlist(self, target: SSHTarget, request: LogRequest) -> tuple[_Batch, int]:
        """The batch (and place in it) that will answer this read: a running or waiting identical one, or new."""
        self._bind_loop()
        key = (target, request.kind, request.name, request.boot, request.roots)
        found = self._inflight.get(key)
        if found is not None and not found[0].task.done():
            return found
        batch = self._pending.get(target)
        if batch is None or batch.task.done() or len(batch.requests) >= MAX_BATCH:
            batch = _Batch(target)
            self._pending[target] = batch
            batch.task = asyncio.get_running_loop().create_task(self._run_batch(batch))
            # Forget the batch however it ends: answered, failed, or cancelled before it began.
            batch.task.add_done_callback(functools.partial(self._forget, batch))
        batch.requests.append(request)
        batch.keys.append(key)
        self._inflight[key] = (batch, len(batch.requests) - 1)
        return self._inflight[key]

    async def _run_batch(self, batch: _Batch) -> list[_Section]:
        await asyncio.sleep(0)  # the calls started in this turn of the loop join the batch first
        if self._pending.get(batch.target) is batch:
            del self._pending[batch.target]
        return await self._read_sections(batch.target, batch.requests)

    def _forget(self, batch: _Batch, _task: object = None) -> None:
        if self._pending.get(batch.target) is batch:
            del self._pending[batch.target]
        for key in batch.keys:
            if self._inflight.get(key, (None, 0))[0] is batch:
                del self._inflight[key]

    async def _read_sections(self, target: SSHTarget, requests: Sequence[LogRequest]) -> list[_Section]:
        """One command for the requests; each section with the lines the last read kept put back."""
        nonce = secrets.token_hex(16)
        resumes = [self.checkpoints.get((target, r.name)) if r.kind == "file" else None for r in requests]
        command = build_command(requests, nonce=nonce, checkpoints=resumes,
                                timeout_s=self.limits.command_timeout_s,
                                count_before_bytes=self.limits.count_before_bytes,
                                small_file_bytes=self.limits.small_file_bytes)
        what = ", ".join(r.label for r in requests)
        output = await self.run(target, command, what=what)
        sections, finished = parse_output(output, nonce=nonce, count=len(requests))
        _check_finished(output, finished, target, what)
        for request, section, previous in zip(requests, sections, resumes, strict=True):
            if section.unchanged and previous is not None and previous.tail_line is not None:
                # Nothing added since the last read of the newest boot: its answer again.
                self.transfer.continued += 1
                section.lines, section.skipped = list(previous.lines), previous.skipped
                section.index = section.boots_seen = previous.boot
                section.span = (previous.line, previous.tail_line - 1)
                if previous.base is not None:
                    section.base = (previous.base, 1)
                continue
            if section.continued:
                # The host read only what was added since the last read: put the known lines first.
                if previous is None or previous.tail_line is None:
                    section.failure = (f"{request.label}: host {target.name} went on from a read this server "
                                       "did not make; try again")
                    continue
                self.transfer.continued += 1
                section.lines[:0] = previous.lines
                section.skipped = None if section.skipped is None else section.skipped + previous.skipped
            if request.kind == "file":
                self._remember((target, request.name), section, previous)
        return sections

    async def read_files(self, target: SSHTarget, requests: Sequence[FileRequest], *,
                         cap_bytes: int) -> list[RemoteText | None]:
        """Read each file (a serve script, its env file), at most cap_bytes each, in one command."""
        nonce = secrets.token_hex(16)
        command = build_files_command(requests, nonce=nonce, cap_bytes=cap_bytes)
        what = " and ".join(f"{target.name}:{r.path}" for r in requests)
        output = await self.run(target, command, what=what)
        frames, finished = parse_frames(output, nonce=nonce, count=len(requests))
        _check_finished(output, finished, target, what)
        return [file_text(frame, request, target.name, cap_bytes) for frame, request in zip(frames, requests,
                                                                                           strict=True)]

    async def dry_runs(self, target: SSHTarget, script: RemoteText, modes: Sequence[str], roots: Sequence[str], *,
                       timeout_s: float, cap_bytes: int) -> list[DryRun]:
        """'<script> <mode> --dry-run' for each mode, in one command; each killed on the host at timeout_s.

        script is the file as read_files returned it: the host runs it only while its cksum
        is still the one read, so the text that was checked is the text that runs.
        """
        nonce = secrets.token_hex(16)
        command = build_dry_run_command(script.path, script.cksum, modes, roots, nonce=nonce, timeout_s=timeout_s,
                                        cap_bytes=cap_bytes)
        limit_s = math.ceil(timeout_s)
        what = " and ".join(f"`{script.path} {mode} --dry-run`" for mode in modes)
        # The host kills each run at limit_s; this is the backstop should the host not answer.
        output = await self.run(target, command, what=what, verb="running",
                                timeout_s=len(modes) * limit_s + self.limits.command_timeout_s)
        frames, finished = parse_frames(output, nonce=nonce, count=len(modes))
        _check_finished(output, finished, target, what)
        return [dry_run_result(frame, mode, script.path, roots, target.name, nonce=nonce, timeout_s=limit_s)
                for frame, mode in zip(frames, modes, strict=True)]

    def _remember(self, key: tuple[SSHTarget, str], section: _Section, previous: Checkpoint | None) -> None:
        """Keep the newest marker (and, for the newest boot, its lines so far) for the next read."""
        anchor = section.checkpoint
        if anchor is None:
            if section.error:
                self.checkpoints.pop(key, None)
            return
        same_anchor = previous is not None and (
            previous.inode, previous.offset, previous.line, previous.boot, previous.text, previous.base) == (
            anchor.inode, anchor.offset, anchor.line, anchor.boot, anchor.text, anchor.base)
        if section.tail is None and same_anchor and previous is not None:
            anchor = previous  # an older boot was read: where the newest one stopped still holds
        elif section.tail is not None and section.index == anchor.boot and section.skipped is not None:
            offset, line, cksum = section.tail
            kept = tuple(item for item in section.lines if item.number < line)
            anchor = replace(anchor, tail_offset=offset, tail_line=line, tail_cksum=cksum, lines=kept,
                             skipped=section.skipped)
        self.checkpoints.pop(key, None)
        self.checkpoints[key] = anchor  # the most recent last; the oldest go past MAX_CHECKPOINTS
        while len(self.checkpoints) > MAX_CHECKPOINTS:
            del self.checkpoints[next(iter(self.checkpoints))]

    async def run(self, target: SSHTarget, script: str, *, what: str, verb: str = "reading",
                  timeout_s: float | None = None) -> bytes:
        """Run one sh script on the host (REMOTE_COMMAND, script on stdin); its stdout, within the limits.

        what and verb name the work in every message ("reading <what>"); timeout_s replaces
        the limits' command timeout for this command.
        """
        doing = Doing(verb, what, timeout_s if timeout_s is not None else self.limits.command_timeout_s)
        entry = self._entry(target)
        async with entry.slots:
            entry.busy += 1
            if entry.idle is not None:
                entry.idle.cancel()
                entry.idle = None
            try:
                reused = entry.conn is not None and not entry.conn.is_closed()
                conn = await self._connection(target, entry, doing)
                try:
                    return await self._exec(conn, target, script, doing)
                except _ChannelRefused:
                    if not reused:
                        raise
                    # A pooled connection the host has since closed: one fresh try.
                    self._drop(entry)
                    conn = await self._connection(target, entry, doing)
                    return await self._exec(conn, target, script, doing)
            except _ChannelRefused as exc:
                raise RemoteError(
                    f"{target.where()}: the host refused to start the command {doing} ({exc}); "
                    "check that the SSH user may run commands (no ForceCommand, a login shell) and try again"
                ) from exc.__cause__
            finally:
                entry.busy -= 1
                if entry.busy == 0 and entry.conn is not None:
                    loop = asyncio.get_running_loop()
                    entry.idle = loop.call_later(self.limits.idle_close_s, self._close_idle, entry)

    async def close(self) -> None:
        """Close every connection (the server's shutdown; idle ones close by themselves)."""
        entries = list(self._entries.values())
        self._entries.clear()
        for entry in entries:
            if entry.idle is not None:
                entry.idle.cancel()
            conn, entry.conn = entry.conn, None
            if conn is not None:
                conn.close()
                await conn.wait_closed()

    def open_connections(self) -> int:
        return sum(1 for e in self._entries.values() if e.conn is not None and not e.conn.is_closed())

    # -- connections --------------------------------------------------------------------

    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Connections and reads belong to the loop that made them (the CLI runs one loop per call).
            self._entries.clear()
            self._pending.clear()
            self._inflight.clear()
            self._loop = loop

    def _entry(self, target: SSHTarget) -> _Entry:
        self._bind_loop()
        entry = self._entries.get(target)
        if entry is None:
            entry = _Entry(slots=asyncio.Semaphore(self.limits.channels_per_host))
            self._entries[target] = entry
        return entry

    def _drop(self, entry: _Entry) -> None:
        conn, entry.conn = entry.conn, None
        if conn is not None:
            conn.abort()

    def _close_idle(self, entry: _Entry) -> None:
        entry.idle = None
        if entry.busy == 0 and entry.conn is not None:
            conn, entry.conn = entry.conn, None
            conn.close()

    async def _connection(self, target: SSHTarget, entry: _Entry, doing: Doing) -> asyncssh.SSHClientConnection:
        async with entry.connect_lock:
            if entry.conn is not None and not entry.conn.is_closed():
                return entry.conn
            entry.conn = await connect(target, self.limits, what=doing.what,
                                       verb="read" if doing.verb == "reading" else "run")
            return entry.conn

    async def _exec(self, conn: asyncssh.SSHClientConnection, target: SSHTarget, script: str, doing: Doing) -> bytes:
        import asyncssh

        limits = self.limits
        out = bytearray()
        err = bytearray()
        received = [0]

        async def pump(reader: asyncssh.SSHReader[bytes], buf: bytearray) -> None:
            while chunk := await reader.read(65536):
                received[0] += len(chunk)
                if received[0] > limits.cap_bytes:
                    raise _OverCap
                buf += chunk

        process: asyncssh.SSHClientProcess[bytes] | None = None
        self.transfer.commands += 1
        self.transfer.sent_bytes += len(REMOTE_COMMAND) + len(script)
        try:
            async with asyncio.timeout(doing.timeout_s):
                try:
                    process = await conn.create_process(REMOTE_COMMAND, encoding=None)
                    process.stdin.write(script.encode())
                    process.stdin.write_eof()
                except (asyncssh.ChannelOpenError, asyncssh.DisconnectError, BrokenPipeError,
                        ConnectionResetError) as exc:
                    raise _ChannelRefused(str(exc)) from exc
                await asyncio.gather(pump(process.stdout, out), pump(process.stderr, err))
                completed = await process.wait()
        except TimeoutError as exc:
            _stop(process)
            raise RemoteError(
                f"{target.where()}: {doing} took longer than {doing.timeout_s:g} s and was "
                "stopped; the host may be overloaded, or podman may hang there (try the read by hand over ssh); "
                "try again later"
            ) from exc
        except _OverCap as exc:
            _stop(process)
            raise RemoteError(
                f"{target.where()}: {doing} sent more than {limits.cap_bytes:,} bytes, the cap on one "
                "answer, and was stopped; a boot's ledger lines are a few KiB: is this the radiance boot log?"
            ) from exc
        except _ChannelRefused:
            raise
        except asyncio.CancelledError:
            _stop(process)  # the client gave up on the call: the command stops there and then too
            raise
        except (asyncssh.Error, OSError) as exc:
            self._drop_conn(conn)
            raise RemoteError(
                f"{target.where()}: the connection dropped while {doing} ({_reason(exc)}); "
                "it was not finished; try again, and check the host and the network if it repeats"
            ) from exc
        finally:
            self.transfer.received_bytes += received[0]
        status = completed.exit_status
        if status is None and completed.exit_signal is None:
            self._drop_conn(conn)
            raise RemoteError(
                f"{target.where()}: the session {doing} ended without an exit status (the connection or "
                "the session dropped); try again, and check the host and the network if it repeats"
            )
        if status != 0 and not out:
            said = err.decode("utf-8", "replace").strip().splitlines()
            tail = f": {said[-1][:300]!r}" if said else ""
            how = f"signal {completed.exit_signal[0]}" if completed.exit_signal else f"status {status}"
            raise RemoteError(
                f"{target.where()}: the command {doing} ended with {how}{tail}; the host needs POSIX "
                "sh, grep, awk and coreutils (readlink -f, head -c, tail -c) on the SSH user's PATH"
            )
        return bytes(out)

    def _drop_conn(self, conn: asyncssh.SSHClientConnection) -> None:
        for entry in self._entries.values():
            if entry.conn is conn:
                self._drop(entry)


def _check_finished(output: bytes, finished: bool, target: SSHTarget, what: str) -> None:
    """A RemoteError unless the program's end marker arrived; an empty answer is told apart."""
    if finished:
        return
    if not output:
        # Exit status 0 and not one byte: the shell never got the program. A ForceCommand, a
        # forced command= in authorized_keys, or an SSH server that drops the session's stdin.
        raise RemoteError(
            f"{target.where()}: the host sent nothing back for {what}: the command `{REMOTE_COMMAND}` ended at once "
            "with status 0, so the program sent on its stdin never ran there. A ForceCommand (sshd_config) or "
            "command=\"...\" (authorized_keys) replaces the command, or the SSH server does not pass stdin on; "
            f"check that `echo echo ok | ssh <host> {REMOTE_COMMAND}` prints ok, and lift the forced command for "
            "this key"
        )
    raise RemoteError(
        f"{target.where()}: the answer for {what} stopped before its end (the command was cut off); "
        "try again; if it repeats, run the read by hand over ssh to see what stops it"
    )


class _ChannelRefused(Exception):
    """The command could not be started on the connection (it may have been closed by the host)."""


def _stop(process: asyncssh.SSHClientProcess[bytes] | None) -> None:
    if process is None:
        return
    try:
        process.kill()  # the host's shell gets SIGKILL where sshd allows signals
    except OSError:
        pass
    process.close()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:200]


# ---------------------------------------------------------------------------------------
# Connecting, with host keys always verified

_HANDSHAKE_TRIES = 3

_KEYSCAN_HELP = (
    "add the host's key out of band: run `ssh-keyscan {port_flag}{address} > /tmp/{name}.keys`, compare "
    "`ssh-keygen -lf /tmp/{name}.keys` with the fingerprint the host itself shows (on its console: "
    "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), and only if they match append the line to {known}"
)


def known_hosts_files(target: SSHTarget, configured: Sequence[str] | None) -> list[str]:
    """The known_hosts files to verify with: the fleet config's, ssh config's, or ~/.ssh/known_hosts.

    ssh config may say ``UserKnownHostsFile none`` (asyncssh would then skip verification);
    that is not honoured: the default file is used instead, so a key is always checked.
    """
    if target.known_hosts:
        return [os.path.expanduser(target.known_hosts)]
    files = [os.path.expanduser(f) for f in configured or () if f not in ("none", "/dev/null")]
    files = [f for f in files if os.path.isfile(f)]
    return files or [os.path.expanduser("~/.ssh/known_hosts")]


async def connect(target: SSHTarget, limits: Limits, *, what: str = "a ledger",
                  verb: str = "read") -> asyncssh.SSHClientConnection:
    """One verified, authenticated connection, or a RemoteError that names the host, the read and the remedy."""
    import asyncssh

    where = f"{target.where()}, to {verb} {what}"

    kwargs: dict[str, object] = {
        "host": target.address,
        "connect_timeout": limits.connect_timeout_s,
        "login_timeout": limits.connect_timeout_s,
        "keepalive_interval": 30,
        "keepalive_count_max": 3,
    }
    if target.port is not None:
        kwargs["port"] = target.port
    if target.user is not None:
        kwargs["username"] = target.user
    if target.identity is not None:
        kwargs["client_keys"] = [os.path.expanduser(target.identity)]
    config = [os.path.expanduser(target.ssh_config)] if target.ssh_config else ()
    try:
        options = await asyncio.to_thread(asyncssh.SSHClientConnectionOptions, config=config, **kwargs)
    except (OSError, ValueError, asyncssh.Error) as exc:
        raise RemoteError(
            f"{where}: the SSH settings cannot be used ({_reason(exc)}); check identity, the "
            "ssh config file and the host entry in the fleet config"
        ) from exc
    configured = options.known_hosts
    files = known_hosts_files(target, configured if isinstance(configured, list) else None)
    shown_files = " or ".join(files)
    # The address after ~/.ssh/config is applied (an alias's Hostname and Port).
    real_host = str(getattr(options, "host", "") or target.address)
    real_port = getattr(options, "port", None) or target.port
    port_flag = f"-p {real_port} " if real_port not in (None, 22) else ""
    help_text = _KEYSCAN_HELP.format(port_flag=port_flag, address=real_host, name=target.name, known=files[0])
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise RemoteError(
            f"{where}: the known_hosts file {missing[0]} does not exist, so the host's key cannot be "
            f"verified and the connection is refused; {help_text} (or set known_hosts = ... for the host)"
        )
    try:
        async with asyncio.timeout(limits.connect_timeout_s * 2):
            for attempt in range(_HANDSHAKE_TRIES):
                try:
                    return await asyncssh.connect(target.address, options=options, known_hosts=files)
                except (asyncssh.ConnectionLost, ConnectionResetError):
                    # sshd drops handshakes beyond MaxStartups (10 at once by default) at random;
                    # many host entries on one sshd meet that. A short pause, then again.
                    if attempt == _HANDSHAKE_TRIES - 1:
                        raise
                    await asyncio.sleep(0.05 * (attempt + 1) * (1 + secrets.randbelow(100) / 100))
            raise AssertionError("unreachable")
    except asyncssh.HostKeyNotVerifiable as exc:
        if _host_listed(files, real_host, real_port if isinstance(real_port, int) else None):
            raise RemoteError(
                f"{where}: REFUSED: the host's key does not match the one recorded in {shown_files}. "
                "Either the host was reinstalled or someone is in the middle; do not remove the old line "
                f"until you know which. To accept a new key, {help_text} after removing the old line "
                f"(`ssh-keygen -R {real_host} -f {files[0]}`)"
            ) from exc
        raise RemoteError(
            f"{where}: REFUSED: the host's key is not in {shown_files}, so it cannot be verified; "
            f"{help_text}"
        ) from exc
    except asyncssh.PermissionDenied as exc:
        raise RemoteError(
            f"{where}: login refused ({_reason(exc)}); check user and identity for the host in the "
            f"fleet config or ~/.ssh/config, and that `ssh {target.address} true` works without a password"
        ) from exc
    except TimeoutError as exc:
        raise RemoteError(
            f"{where}: no SSH connection within {limits.connect_timeout_s:g} s; check that the "
            "host is up and reachable on its SSH port, then try again"
        ) from exc
    except (asyncssh.Error, OSError) as exc:
        raise RemoteError(
            f"{where}: cannot connect ({_reason(exc)}); check the address and port in the fleet "
            "config or ~/.ssh/config, and that sshd runs there"
        ) from exc


def _host_listed(files: Sequence[str], host: str, port: int | None) -> bool:
    """True if known_hosts holds any key for this host: then the key it showed has changed."""
    import asyncssh

    try:
        known = asyncssh.read_known_hosts(list(files))
        host_keys, ca_keys, *_ = known.match(host, "", port if port not in (None, 22) else None)
    except (OSError, ValueError, asyncssh.Error):
        return False
    return bool(host_keys or ca_keys)
