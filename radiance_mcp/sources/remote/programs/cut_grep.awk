# The cutter's driver for one log (ledger_read.sh's cut_boot): grep's numbered phrase lines in
# ("num:text", or "num:offset:text" with withoff=1), after cut.awk's functions.
BEGIN { start() }
{
  c = index($0, ":"); num = substr($0, 1, c - 1) + bl; t = substr($0, c + 1); off = -1
  if (withoff) { c = index(t, ":"); off = substr(t, 1, c - 1) + bo; t = substr(t, c + 1); if (off >= lim) exit }
  if (take(num, off, t)) exit
}
END { finish() }
