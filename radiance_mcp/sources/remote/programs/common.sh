# shellcheck shell=sh
# The start of every program the server sends to a host (commands.py puts it first, its
# comment lines removed). The server sets nonce (and the other settings) after this text and
# before the call lines; no word of it is built from a tool's input.
# shellcheck disable=SC2154  # nonce is set by the lines the server puts before the calls; i by each caller
export LC_ALL=C
# No pathname expansion: words split from a command's output are never globbed against files.
set -f
# fd 4 is the command's stdout, for output that must bypass a command substitution.
exec 4>&1

# One control line of the output protocol: '#<nonce> <kind> <section> ...' (framing.py reads them).
control_line() { printf '#%s %s\n' "$nonce" "$*"; }

# The host-side check of every file a program reads or runs (section $i): sets r to the real
# path of $1 when that is a readable regular file under one of the roots $2...; else writes
# the X line that says why and fails.
real_path_under_roots() {
  f=$1; shift
  if [ ! -e "$f" ]; then control_line X "$i" missing; return 1; fi
  # Security: resolve symlinks and '..' here, on the host, and require the real path under
  # a root: a symlink planted in a log directory cannot lead a read out of it. A file that is
  # no symlink itself has the real path of its directory (cd -P resolves every symlink and '..'
  # in it; a builtin, no process) and its own name; else readlink -f resolves the whole path.
  # (The programs name files by absolute paths only, so the working directory is free to move.)
  b=${f##*/}
  if [ ! -h "$f" ] && [ "$b" != . ] && [ "$b" != .. ] && cd -P -- "${f%/*}/" 2> /dev/null; then
    r=${PWD%/}/$b
  else
    r=$(readlink -f -- "$f") || { control_line X "$i" outside; return 1; }
  fi
  # (A resolved path that starts with the root as written lies in it: it has no symlink left.)
  ok=
  for root do
    case $r in "${root%/}"/*) ok=1; break ;; esac
    rr=$(readlink -f -- "$root") || continue
    case $r in "${rr%/}"/*) ok=1; break ;; esac
  done
  if [ -z "$ok" ]; then control_line X "$i" outside; return 1; fi
  if [ ! -f "$r" ]; then control_line X "$i" notfile; return 1; fi
  if [ ! -r "$r" ]; then control_line X "$i" unreadable; return 1; fi
}
