# The cutter's driver for small files (ledger_read.sh's cut_queued), after cut.awk's functions:
# lines "<section> <boot> <size> <real path>" in, each file read whole here, one after the other,
# and its boot sent as one pass of cut_boot over it would send it (with an H line: read whole).
# size: the bytes the read stops at (lines that start past them were written after the size
# was taken), or '-' when not known: a file that holds big bytes or more is then not cut here
# but its line goes back out on fd 5, to be read as any other log. (The summaries the cutter
# writes to fd 3 are not wanted here.)
{
  i = $1; k = $2; lim = $3; f = substr($0, length($1) + length($2) + length($3) + 4)
  start(); num = 0; off = 0; whole = 1
  while ((status = (getline t < f)) > 0) {
    if (lim != "-" && off >= lim + 0) break
    if (lim == "-" && off + length(t) >= big) { whole = 0; break }
    take(++num, off, t); off += length(t) + 1
  }
  close(f)
  if (!whole) { print $0 > "/dev/fd/5"; next }
  printf "#%s S %s\n", nn, i
  if (status < 0) printf "#%s X %s unreadable\n", nn, i
  else if (num == 0) printf "#%s X %s empty\n", nn, i
  else { printf "#%s H %s\n", nn, i; total = num; finish() }
}
