# Markers in one chunk of the search back from the end (find_boot_from_end): "offset:text" lines
# in (grep -b on the bytes from st); the markers whose lines start in (st, hi] (or [0, hi] when
# st = 0) are new. With have markers found after hi, the oldest at nx: "ok <offset> <next
# marker's offset, or s>" for the need-th from the end; "all <n>" when the file start is reached
# with fewer; else "more <markers found> <the oldest one's offset>".
{ c = index($0, ":"); o = substr($0, 1, c - 1) + st
  if ((o > st || st == 0) && o <= hi) { n++; O[n] = o } }
END {
  O[n + 1] = nx
  if (have + n >= need) { j = n - (need - have) + 1; printf "ok %.0f %.0f\n", O[j], O[j + 1]; exit }
  if (st == 0) { printf "all %.0f\n", have + n; exit }
  printf "more %.0f %.0f\n", have + n, (n ? O[1] : nx)
}
