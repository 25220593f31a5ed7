# One pass over the whole file for the markers: "line:offset:text" in; the chosen boot's place out:
#   ok <boots> <boot> <offset> <line> <end offset> <next marker's line or -1>
# and the newest marker, the next read's anchor, as a C line (to fd 4, the command's stdout).
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
