# shellcheck shell=sh
# The engine log read: read_engine_file once per log file, read_engine_podman once per container,
# for another engine's log (vLLM, SGLang, llama.cpp). Runs after common.sh. commands.build_engine_command
# puts before the call lines the settings (nonce, words, max_line_bytes, lines_cap, time_limit),
# word_lines (grep for the engine's words, engines.engine_words) and lines_awk (engine_lines.awk).
# Files are only ever named in redirections and after '--', never where a tool reads options.
# Only the lines holding a word leave the host, numbered as in the log (see engine_lines.awk), so a
# log of 100 MiB of request lines after its start-up moves a few KiB.
# shellcheck disable=SC2154  # the settings above are set by the lines the server puts before the calls; r by common.sh

# The numbered lines on stdin (grep's, then the nonce line) to the protocol's lines; $1 names the
# failure when the nonce line does not come back with status 0 (podman's exit status, or a cut read).
engine_lines() {
  awk -v kws="$words" -v max="$max_line_bytes" -v cap="$lines_cap" -v nn="$nonce" -v i="$i" \
    -v sent="#$nonce P " -v what="$1" "$lines_awk"
}
# Section $1: the file $2 (its real path under the roots $3...), read up to its size when the read
# began (a growing log adds no half line); a line of the nonce after its bytes gives the last line's number.
read_engine_file() {
  i=$1 f=$2
  shift 2
  control_line S "$i"
  real_path_under_roots "$f" "$@" || return
  # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
  set -- $(ls -dinL -- "$r")
  if [ -z "${6-}" ]; then control_line X "$i" unreadable; return; fi
  if [ "$6" -eq 0 ]; then control_line X "$i" empty; return; fi
  { head -c "$6" < "$r"; printf '#%s P 0\n' "$nonce"; } | word_lines -e "#$nonce P " | engine_lines failed
}
# Section $1: the container $2's `podman logs` (as ledger_read.sh's read_podman_logs reads it), killed
# at the time limit; its last line holding "Error" comes back for the message if podman fails.
read_engine_podman() {
  i=$1 c=$2
  control_line S "$i"
  if ! command -v podman > /dev/null 2>&1; then control_line X "$i" nopodman; return; fi
  # shellcheck disable=SC2086  # time_limit is empty or 'timeout -s KILL <n>': split on purpose
  { $time_limit podman logs -- "$c" 2>&1; printf '#%s P %s\n' "$nonce" "$?"; } |
    word_lines -e "#$nonce P " -e Error | engine_lines podman
}
