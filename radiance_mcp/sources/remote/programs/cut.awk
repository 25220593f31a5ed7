# The cutter's functions: take() gets a log's numbered lines, finish() sends the chosen boot's
# lines, numbered as in the log, with its B, K (and R when known) lines. Two drivers feed them:
# cut_grep.awk (grep's numbered phrase lines, one log: cut_boot) and cut_files.awk (whole small
# files, one after the other in one awk: cut_queued); each is sent after this text.
# Boots start at marker lines; without any (and marks=0), at runs of echoed flags, else one
# boot: the rules of ledger._boot_starts. A summary for the shell goes to fd 3:
#   ok <boots> <boot> <first line> <last line, or -1: not known here> <count from: offset line>
#      <where the read stopped: the offset and number of the line the end line starts, or -1 ->
#   | back | range | stale
# bl, bo, bi: line, byte and boot counts before the input's first line (a pass from an anchor);
# the newest marker seen becomes the next read's anchor (a C line), unless nocp=1. With cont=1
# the input continues boot bi+1 (from its marker at c_off, line first0) where the last read stopped.
# sent: the input ends with a line of the nonce and a status (podman's exit status; 0 after a
# file's bytes), alone or glued to a last line without newline: its number gives the last line.
# cb: the C line's numbering, '-' (the file's) or the byte offset line 1 and boot 1 count from.
# rebase="<bytes>": the input is the file's end from byte bo on (bo > 0, its first line maybe the tail of
# a longer one, so no marker there counts); only its newest boot is cut, its lines and boot counted from
# 1 at its marker (cb, and the summary's count-from offset, are that marker's offset): "none" without
# one past <bytes> (the lines before such a one are counted instead).
# kws: the keywords joined by '|'; mk: the boot marker; max: the longest line kept; nn: the nonce.
# Numbers leave awk through printf "%.0f": mawk prints integers past 2^31 as 2.1e+09 otherwise.
# (No single quote in the code: it travels in single quotes in the sh program; comments are not sent.)
function iskw(t,  j) { for (j = 1; j <= nk; j++) if (index(t, K[j])) return 1; return 0 }
function summary(s) { print s > "/dev/fd/3" }
# A fresh log: nothing taken yet (bl, bo, bi, seen come as settings).
function start() {
  nk = split(kws, K, "|"); prev = -2; total = 0; bl += 0; bo += 0; bi += 0; seen += 0; rec = 0
  n = nm = nf = skip = stale = got = st = 0; err = ""
  split("", N); split("", T); split("", M); split("", MO); split("", F); split("", B)
}
# One numbered line (its number, byte offset or -1, text); 1 when the pass is to stop here.
function take(num, off, t) {
  # From an anchor, the first line must be the marker line of the anchor, byte for byte, where it was.
  if (anchored && !rec++ && (off != bo || t != ENVIRON["anchor_text"])) { stale = 1; return 1 }
  if (sent != "" && (pos = index(t, sent))) {
    # The end line: alone if the log ended with a newline, else glued to its last line.
    st = substr(t, pos + length(sent)) + 0; got = 1; stop_off = off; stop_num = num
    if (pos == 1) { total = num - 1; return 0 }
    total = num; t = substr(t, 1, pos - 1)
  }
  if (!iskw(t)) { if (index(t, "Error")) err = t; return 0 }
  if (length(t) > max) { skip++; return 0 }
  n++; N[n] = num; T[n] = t
  if (index(t, mk) && !(rebase != "" && off == bo)) { M[++nm] = n; MO[nm] = off; MK[nm] = skip }
  u = t; gsub(/\033\[[0-9;?]*[ -\/]*[@-~]/, "", u); sub(/\r$/, "", u)
  if (u ~ /(^|[ \t])I[ \t]+--[a-z][a-z0-9-]*[ \t]+[^ \t]+[ \t]*$/) {
    if (num != prev + 1) F[++nf] = n
    prev = num
  }
  return 0
}
# The chosen boot out, once every line is in.
function finish() {
  if (stale || (anchored && !rec)) { summary("stale"); return }
  if (sent != "" && (!got || st != 0)) {
    printf "#%s X %s podman %.0f\n", nn, i, (got ? st : -1)
    if (err != "") printf "#%s E %s %s\n", nn, i, err
    summary("podman"); return
  }
  if (rebase != "" && (!nm || MO[nm] <= rebase + 0)) { summary("none"); return }
  if (rebase != "") {
    M[1] = M[nm]; MO[1] = MO[nm]; skip -= MK[nm]; nm = 1; sh = N[M[1]] - 1; cb = MO[1]
    for (x = M[1]; x <= n; x++) N[x] -= sh
    total -= sh; stop_num -= sh
  }
  if (cont) { cnt = nm + 1; B[1] = 1; for (j = 1; j <= nm; j++) B[j + 1] = M[j] }
  else if (nm) { cnt = nm; for (j = 1; j <= nm; j++) B[j] = M[j] }
  else if (nf && !marks) { cnt = nf; for (j = 1; j <= nf; j++) B[j] = F[j] }
  else if (n && !marks) { cnt = 1; B[1] = 1 }
  else { if (!marks) printf "#%s X %s nophrase\n", nn, i; summary("none"); return }
  tot = bi + cnt
  p = (k > 0) ? k : tot + 1 + k
  if (nm && marks && !nocp && length(T[M[nm]]) <= 4096)
    printf "#%s C %s %s %.0f %.0f %.0f %s %s\n", nn, i, ino, MO[nm], N[M[nm]], tot, cb, T[M[nm]]
  else if (cont)
    printf "#%s C %s %s %.0f %.0f %.0f %s %s\n", nn, i, ino, c_off, first0, tot, cb, ENVIRON["anchor_text"]
  if (p < 1 || p > tot) {
    if (!marks) printf "#%s X %s range %.0f\n", nn, i, tot
    summary(sprintf("range %.0f %.0f", tot, p)); return
  }
  if (p <= bi) { summary(sprintf("back %.0f %.0f", tot, p)); return }
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
  stop = (got && stop_off >= 0) ? sprintf("%.0f %.0f", stop_off, stop_num) : "-1 -"
  summary(sprintf("ok %.0f %.0f %.0f %.0f %s %s", tot, p, first, last, from, stop))
}
