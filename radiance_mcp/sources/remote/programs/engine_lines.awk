# The engine log read's lines (engine_read.sh's engine_lines): grep's numbered lines ("num:text")
# of the lines holding a word, then the nonce line "#<nonce> P <status>" (sent), alone, or glued to
# a last line without newline: its number gives the log's last line.
# kws: the words joined by '|'; max: the longest line sent (longer ones are counted, K); cap: the
# bytes of lines sent at most: past it the oldest are dropped (counted, L), the newest kept;
# nn: the nonce; i: the section; what: the X code when the nonce line is missing or its status is not 0.
# Out: the lines kept, oldest first, as "num:text"; then K, L (when lines were dropped) and R 1 <last>;
# or X what <status> (and E, the last line holding "Error" but no word: podman's message).
# Numbers leave awk through printf "%.0f": mawk prints integers past 2^31 as 2.1e+09 otherwise.
# (No single quote in the code: it travels in single quotes in the sh program; comments are not sent.)
function iskw(t,  j) { for (j = 1; j <= nk; j++) if (index(t, W[j])) return 1; return 0 }
BEGIN { nk = split(kws, W, "|"); lo = 1; hi = 0; held = 0; skip = 0; drop = 0; total = -1; got = 0; st = -1; err = "" }
{
  c = index($0, ":"); num = substr($0, 1, c - 1) + 0; t = substr($0, c + 1)
  if ((p = index(t, sent))) {
    st = substr(t, p + length(sent)) + 0; got = 1
    if (p == 1) { total = num - 1; next }
    total = num; t = substr(t, 1, p - 1)
  }
  if (!iskw(t)) { if (index(t, "Error")) err = t; next }
  if (length(t) > max) { skip++; next }
  hi++; N[hi] = num; T[hi] = t; held += length(t) + 12
  while (held > cap && lo < hi) { held -= length(T[lo]) + 12; delete N[lo]; delete T[lo]; lo++; drop++ }
}
END {
  if (!got || st != 0) {
    printf "#%s X %s %s %.0f\n", nn, i, what, (got ? st : -1)
    if (err != "") printf "#%s E %s %s\n", nn, i, err
    exit
  }
  if (total == 0) { printf "#%s X %s empty\n", nn, i; exit }
  for (x = lo; x <= hi; x++) print N[x] ":" T[x]
  printf "#%s K %s %.0f\n", nn, i, skip
  if (drop) printf "#%s L %s %.0f\n", nn, i, drop
  printf "#%s R %s 1 %.0f\n", nn, i, total
}
