# Markers in a window before the anchor: "offset:text" lines in; the need-th before the anchor out.
{ c = index($0, ":"); o = substr($0, 1, c - 1) + 0
  if (st > 0 && o == 0) next
  n++; O[n] = o + st }
END {
  if (n < need) { print "more"; exit }
  j = n - need + 1; e = (need > 1) ? O[j + 1] : a
  printf "ok %.0f %.0f\n", O[j], e
}
