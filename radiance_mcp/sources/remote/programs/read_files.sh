# shellcheck shell=sh
# The file read: send_file, once per file (a serve script, its env file). Runs after
# common.sh; commands.build_files_command adds nonce and the call lines.
# Output: S, then X (why not) or D <cksum> and the bytes, ended by a Y line (framing.py).
# shellcheck disable=SC2154  # nonce is set by the lines the server puts before the calls; r by common.sh

# File $3 as section $1 when it lies under the roots $4...: its cksum, then at most $2 + 1 of
# its bytes (one over the cap tells the reader it grew past it).
send_file() {
  i=$1 cap=$2 f=$3
  shift 3
  control_line S "$i"
  real_path_under_roots "$f" "$@" || return
  # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
  set -- $(ls -dinL -- "$r")
  if [ -z "${6-}" ]; then control_line X "$i" unreadable; return; fi
  if [ "$6" -gt "$cap" ]; then control_line X "$i" toolarge "$6"; return; fi
  # The cksum before the bytes: if the file changes between the two, the dry run refuses it.
  # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
  control_line D "$i" $(cksum < "$r")
  head -c $((cap + 1)) < "$r"
  printf '\n#%s Y %s\n' "$nonce" "$i"
}
