# shellcheck shell=sh
# The dry run: dry_run, once per mode. Runs after common.sh; commands.build_dry_run_command
# adds nonce, output_cap, stderr_cap, time_limit and the call lines.
# The dry run's stdout goes through head to fd 4 at once; its stderr, then its exit status,
# go through tail into a variable (fd 5) and follow as a W block. The script gets neither
# fd 3, 4 nor 5, nor the nonce (a shell variable, never exported).
# shellcheck disable=SC2154  # nonce, output_cap, stderr_cap, time_limit are set by the lines the server puts before the calls; r by common.sh

# '<script> <mode> --dry-run' as section $1: $2 the script, $3 its cksum when its text was
# checked, $4 the mode, $5... the roots the script's real path must lie under.
dry_run() {
  i=$1 f=$2 sum=$3 m=$4
  shift 4
  control_line S "$i"
  real_path_under_roots "$f" "$@" || return
  # Security: no dry run without a time limit on the host: a mode that ignores --dry-run and
  # starts the engine, or hangs, is killed there whatever becomes of the connection.
  if [ -z "$time_limit" ]; then control_line X "$i" notimeout; return; fi
  # Security: the script run is the one whose text was checked (it handles --dry-run).
  if [ "$(cksum < "$r")" != "$sum" ]; then control_line X "$i" changed; return; fi
  if [ -x "$r" ]; then set -- "$r"; control_line A "$i" exec
  elif command -v bash > /dev/null 2>&1; then set -- bash "$r"; control_line A "$i" bash
  else control_line X "$i" nobash; return; fi
  control_line D "$i"
  stderr_tail=$(
    {
      {
        # shellcheck disable=SC2086  # time_limit is 'timeout -s KILL <n>': split into words on purpose
        { (cd -- "${r%/*}/" && exec $time_limit "$@" "$m" --dry-run) < /dev/null 2>&1 1>&3 3>&- 4>&- 5>&-
          printf '\n%s %s\n' "$nonce" "$?"
        } | tail -c "$stderr_cap" >&5 3>&-
      } 3>&1 | head -c $((output_cap + 1)) >&4 5>&-
    } 5>&1
  )
  printf '\n#%s Y %s\n' "$nonce" "$i"
  control_line W "$i"
  printf '%s' "$stderr_tail"
  printf '\n#%s Y %s\n' "$nonce" "$i"
}
