# shellcheck shell=sh
# The ledger read: read_ledger_file (or queue_ledger_file) once per log file, read_podman_logs
# once per container, then cut_queued. Runs after common.sh. commands.build_command puts before
# the call lines the settings (nonce, marker, keywords, max_line_bytes, count_before_max,
# overlap_bytes, small_file_max, settle_s, time_limit), phrase_lines (grep for ledger.KEYWORDS), the awk
# programs (cut_awk with its drivers grep_awk and files_awk, marks_awk, back_awk, last_awk: the
# .awk files beside this one) and anchor_text before each file's call.
# Files are only ever named in redirections and after '--', never where a tool reads options.
# The cutter's summary comes back to the shell on fd 3; fd 4 is the command's stdout.
#
# How a file is read (read_ledger_file), cheapest first:
#   * at most small_file_max bytes: read whole, with every other small file of the command, in
#     one awk at its end (cut_queued; no process per file). A file the last read found small is
#     queued without even a size (queue_ledger_file): the awk hands it back if it has grown past;
#   * the newest boot of a file the last read cut to its end, settled (file_stat): its stat now says
#     the same (device, inode, size, mtime, ctime): the last answer stands (N), no byte is read;
#     the same size at other times: rewritten in place, read afresh;
#   * a checkpoint of the last read (its newest boot marker, where it stopped) still holds: only
#     the bytes after it (N when nothing was added, T when the lines go on);
#   * the newest boot of a file past count_before_max bytes whose marker lies past them and in its last
#     end_bytes (2 MiB, less than the search back below reads for a boot of 1 MiB):
#     found and cut in one pass over those bytes, its lines counted from its marker (O line);
#   * a boot counted from the end (-1, -2, ...): the marker is searched back from the end in
#     chunks of 1, 2, 4 MiB ... (find_boot_from_end), then only that boot is cut (cut_range). The
#     lines before it are counted only when they are at most count_before_max bytes; else its
#     lines count from its marker's byte offset (O line), so the cost follows the boot, not the file;
#   * a boot counted from the start (1, 2, ...): one grep pass numbers every marker, then the boot.
# shellcheck disable=SC2154  # the settings above are set by the lines the server puts before the calls; r by common.sh
cut_boot() {
  anchor_text="$anchor_text" awk -v kws="$keywords" -v mk="$marker" -v max="$max_line_bytes" -v nn="$nonce" \
    -v i="$i" -v k="$k" -v ino="$ino" -v cb="$count_base" "$@" "$cut_awk$grep_awk" 3>&1 1>&4
}
# Small files the command reads whole at its end, one line each: "<section> <boot> <size or -> <real path>".
queued=
# Section i, boot k of the file at real path r (size $1, or -): to cut_queued, unless its path
# cannot travel in a line of the list (or is a special name to awk); then read here.
queue_file() {
  case $r in
    *"
"*|/dev/*|/inet*) if [ "$1" = - ]; then read_checked_file; else cut_whole_file; fi ;;
    *) queued="$queued$i $k $1 $r
" ;;
  esac
}
# Every queued file in one awk pass (cut_files.awk); one that has grown past small_file_max since
# the last read found it small comes back and is read here as any other log, from no checkpoint.
cut_queued() {
  if [ -z "$queued" ]; then return; fi
  back=$(printf '%s' "$queued" | awk -v kws="$keywords" -v mk="$marker" -v max="$max_line_bytes" -v nn="$nonce" \
    -v big="$small_file_max" "$cut_awk$files_awk" 5>&1 1>&4 3>/dev/null)
  queued=
  while IFS= read -r line; do
    if [ -z "$line" ]; then continue; fi
    i=${line%% *} line=${line#* }
    k=${line%% *} line=${line#* }
    r=${line#* }
    control_line S "$i"
    reset_checkpoint
    read_checked_file < /dev/null
  done <<EOF
$back
EOF
  # (One that shrank again meanwhile was queued once more, with its size.)
  cut_queued
}
# How many lines the bytes [$1, $2) hold ($1 a line start, $2 > $1): the newlines before the
# last byte, plus the last line, ended by a newline or not.
count_lines() { echo $(($(tail -c +$(($1 + 1)) < "$r" | head -c $(($2 - $1 - 1)) | wc -l) + 1)); }
# The need-th marker before the anchor, by windows growing 8x back from it; sets M E L.
# (st > 0 always: a hit at the window's first byte may be the tail of a longer line, skipped.)
find_marker_before_anchor() {
  need=$1 w=4194304
  while :; do
    # A window reaching the start costs more than the one plain pass the caller falls back to.
    if [ "$w" -ge "$a_off" ]; then return 1; fi
    st=$((a_off - w))
    # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
    set -- $(tail -c +$((st + 1)) < "$r" | head -c $((a_off - st)) | grep -a -b -F -e "$marker" |
      awk -v st="$st" -v need="$need" -v a="$a_off" "$back_awk")
    if [ "${1-}" = ok ]; then
      M=$2 E=$3
      L=$((a_line - $(tail -c +$((M + 1)) < "$r" | head -c $((a_off - M)) | wc -l)))
      return 0
    fi
    w=$((w * 8))
  done
}
# The phrase lines of boot $4 (of $5), the bytes [$1, $2) from its marker on line $3; $6 0 if the
# cutter is to send the boot's marker as the next read's anchor. A line of the nonce follows the
# bytes (glued to the last line if that has no newline): its number gives the boot's last line,
# so its lines are counted in the same pass (the cutter sends the R line).
cut_range() {
  summary=$({ tail -c +$(($1 + 1)) < "$r" | head -c $(($2 - $1)); printf '#%s P 0\n' "$nonce"; } |
    phrase_lines -b -e "#$nonce P " |
    cut_boot -v withoff=1 -v lim=$(($2 + 1)) -v bo="$1" -v bl=$(($3 - 1)) -v bi=$(($4 - 1)) -v k="$4" -v seen="$5" \
      -v marks=1 -v nocp="${6-1}" -v sent="#$nonce P ")
  # shellcheck disable=SC2086  # the cutter's summary, split into its words on purpose (digits and fixed words)
  set -- "$1" "$2" "$3" "$4" "$5" "${6-1}" $summary
  if [ "$4" -eq "$5" ] && [ "$2" -eq "$s" ] && [ "${7-}" = ok ]; then mark_where_read_stopped "${11}" "${14}" "${15}"; fi
}
# The next read's start: the start of the last line (s - 1 ends it: s; else a window back finds
# it; $2 and $3, when the cutter saw where the bytes ended: its offset and number), with the
# checksum of the 4 KiB before it, which the next read checks are unchanged.
mark_where_read_stopped() {
  if [ "${2--1}" -ge 0 ]; then u=$2 ul=$3
  elif [ -z "$(tail -c +"$s" < "$r" | head -c 1)" ]; then u=$s ul=$(($1 + 1))
  else
    ws=$((s > 65536 ? s - 65536 : 0)) ul=$1
    u=$(tail -c +$((ws + 1)) < "$r" | head -c $((s - ws)) |
      awk -v ws="$ws" '{ st = pos; pos += length($0) + 1 } END { if (NR > 1 || ws == 0) printf "%.0f", ws + st }')
  fi
  if [ -n "$u" ] && [ "$u" -gt 0 ]; then
    uw=$((u > 4096 ? 4096 : u))
    control_line U "$i" "$u" "$ul" "$(tail -c +$((u - uw + 1)) < "$r" | head -c "$uw" | cksum)"
    mark_settled "$u"
  fi
}
# The whole file, [0, s), in one pass: the cutter finds its boots by the rules of ledger._boot_starts
# (markers, else runs of echoed flags, else one boot); the nonce line after the bytes gives the last
# line's number.
# (cut_queued does the same for many files at less cost: this is for a path it cannot take.)
cut_whole_file() {
  summary=$({ head -c "$s" < "$r"; printf '#%s P 0\n' "$nonce"; } | phrase_lines -b -e "#$nonce P " |
    cut_boot -v withoff=1 -v lim=$((s + 1)) -v marks=0 -v sent="#$nonce P ")
}
end_bytes=2097152
# Boot -$1 (1: the newest) found from the end of the file: chunks of 1 MiB, 2 MiB, 4 MiB, ... back
# from byte s (the size when the read began), each grepped for markers, until $1 are found. A chunk
# [st, hi) runs on past hi by the longest line a marker may be on (overlap_bytes bytes), so a marker line
# that starts in it is seen whole even when the marker itself lies past hi; only line starts in
# (st, hi] count (the chunk's first line may be the tail of a longer one, unless st = 0). A boot of
# B bytes costs under 2 B of grep plus the cut of its own bytes; the file before it is not read.
# The lines before the boot are counted (exact line numbers and boot index) only when they are
# at most count_before_max bytes; past that the boot's lines count from 1 at its marker, whose byte offset
# an O line gives, and the index is -$1. Fails (status 1) when the file holds no marker at all.
find_boot_from_end() {
  need=$1 w=1048576 hi=$s have=0 nx=$s
  # The newest boot of a file past count_before_max bytes, its marker past them too: its lines count
  # from its marker (below), so when that lies in the last end_bytes, one pass finds the boot and cuts it.
  if [ "$need" -eq 1 ] && [ "$s" -gt "$count_before_max" ] && [ "$s" -gt "$end_bytes" ]; then
    st=$((s - end_bytes))
    summary=$({ tail -c +$((st + 1)) < "$r" | head -c "$end_bytes"; printf '#%s P 0\n' "$nonce"; } |
      phrase_lines -b -e "#$nonce P " |
      cut_boot -v withoff=1 -v lim=$((s + 1)) -v bo="$st" -v k=1 -v seen=1 -v marks=1 -v nocp=0 -v rebase="$count_before_max" \
        -v sent="#$nonce P ")
    # shellcheck disable=SC2086  # the cutter's summary, split into its words on purpose (digits and fixed words)
    set -- $summary
    if [ "${1-}" = ok ]; then
      control_line O "$i" "$6" 1
      mark_where_read_stopped "$5" "$8" "$9"
      return 0
    fi
  fi
  while :; do
    st=$((hi > w ? hi - w : 0))
    en=$((hi + overlap_bytes < s ? hi + overlap_bytes : s))
    # have: markers found after hi so far; nx: the oldest of them (or s).
    # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
    set -- $(tail -c +$((st + 1)) < "$r" | head -c $((en - st)) | grep -a -b -F -e "$marker" |
      awk -v st="$st" -v hi="$hi" -v have="$have" -v need="$need" -v nx="$nx" "$last_awk")
    case ${1-} in
      ok) break ;;
      all) if [ "$2" -eq 0 ]; then return 1; fi; control_line X "$i" range "$2"; return 0 ;;
      more) have=$2 nx=$3 hi=$st w=$((w * 2)) ;;
      *) control_line X "$i" failed; return 0 ;;
    esac
  done
  M=$2 E=$3 count_base=-
  # nocp=0 for the newest boot: its marker is the next read's anchor.
  cp=$((need > 1))
  if [ "$M" -le "$count_before_max" ]; then
    # [0, M) ends with a newline (M starts a line): wc -l counts the lines before the boot.
    L=$(($(head -c "$M" < "$r" | wc -l) + 1))
    b=$(($(head -c "$M" < "$r" | grep -c -a -F -e "$marker") + 1))
    cut_range "$M" "$E" "$L" "$b" $((b + need - 1)) "$cp"
  else
    control_line O "$i" "$M" "$need"
    count_base=$M
    cut_range "$M" "$E" 1 1 1 "$cp"
  fi
}
# Section $1: boot $2 of file $3 (its real path under the roots ${14}...), from the last read's
# checkpoint $4-$13 ('-' each when there is none): inode, the anchor marker's offset, line, boot
# and length, where the last read stopped (offset, line, cksum of the 4 KiB before), the byte
# offset line numbers count from when the lines before it were not counted ('-': from the file's
# start), and the file's stat when that read stopped at its end (an F line's words).
read_ledger_file() {
  i=$1 k=$2 f=$3 c_ino=$4 c_off=$5 c_line=$6 c_idx=$7 c_len=$8 t_off=$9 t_line=${10} t_sum=${11} c_base=${12}
  c_stat=${13}
  shift 13
  control_line S "$i"
  real_path_under_roots "$f" "$@" || return
  read_checked_file
}
# Section $1: boot $2 of file $3 (under the roots $4...), which the last read found small: checked
# here, then queued for cut_queued without a size (no process of its own).
queue_ledger_file() {
  i=$1 k=$2 f=$3
  shift 3
  control_line S "$i"
  real_path_under_roots "$f" "$@" || return
  reset_checkpoint
  queue_file -
}
reset_checkpoint() { c_ino=- c_off=- c_line=- c_idx=- c_len=- t_off=- t_line=- t_sum=- c_base=- c_stat=-; }
# The file at r as stat sees it (one process): sets ino, s (the size the read stops at) and st_now, its
# "<device> <inode> <size> <mtime> <ctime>" (or -, where stat -c is missing: then ls gives ino and s), and
# ctime. now, the host's clock in seconds, is taken once per command before the first stat.
file_stat() {
  if [ -z "$now" ]; then now=$(date +%s 2> /dev/null); case $now in ''|*[!0-9]*) now=0 ;; esac; fi
  # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
  set -- $(stat -L -c '%d %i %s %Y %Z' -- "$r" 2> /dev/null)
  if [ -n "${5-}" ]; then st_now="$1 $2 $3 $4 $5" ino=$2 s=$3 ctime=$5; return; fi
  st_now=- ctime=
  # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
  set -- $(ls -dinL -- "$r")
  ino=${1-} s=${6-}
}
now=
nl='
'
# The files whose last read left their stat (want_stat, before the calls), and all their stats in one
# stat process (stat_wanted): "<device> <inode> <size> <mtime> <ctime> <real path>" lines. A file whose
# line is the one its last read left is unchanged without a process of its own.
wanted='' stats=''
# File $1, checked under the roots $2... as every read checks it (silently: its own call says why not).
want_stat() {
  f=$1; shift
  real_path_under_roots "$f" "$@" > /dev/null || return 0
  case $r in *"$nl"*) return 0 ;; esac
  wanted="$wanted$r$nl"
}
stat_wanted() {
  if [ -z "$wanted" ]; then return; fi
  # shellcheck disable=SC2086  # the real paths, split at newlines on purpose (set -f is on: no globbing)
  stats=$(IFS=$nl; stat -L -c '%d %i %s %Y %Z %n' -- $wanted 2> /dev/null)
}
# An F line when this read of the newest boot stopped at the file's end ($1: where) and the file is
# settled: its inode changed settle_s seconds or more before now (taken before its stat). ctime, not
# mtime: a program can set mtime back (touch -r, cp -p, rsync -t), never ctime, so a later write cannot
# leave the stat as it was. The next read that finds the same stat sends back the last answer.
mark_settled() {
  if [ "$1" = "$s" ] && [ "$st_now" != - ] && [ $((now - ctime)) -ge "$settle_s" ]; then
    control_line F "$i" "$st_now"
  fi
}
# Section i, boot k of the file at real path r (checked under the roots), from the checkpoint in
# c_* and t_* (the words of read_ledger_file).
read_checked_file() {
  # The numbering the cutter's C line states: the file's own ('-') unless set below.
  count_base=-
  # The stat stat_wanted took, as the last read left it: the last answer stands (no process).
  if [ "$c_stat" != - ] && [ "$k" -eq -1 ]; then
    case $nl$stats$nl in *"$nl$c_stat $r$nl"*) control_line N "$i"; return ;; esac
  fi
  # One stat gives the inode (is it still the same file?), the size the read stops at and the times.
  file_stat
  if [ -z "$s" ]; then control_line X "$i" unreadable; return; fi
  if [ "$s" -eq 0 ]; then control_line X "$i" empty; return; fi
  # A small file is read whole at the end, whatever the last read left: cheaper than checking it.
  if [ "$s" -le "$small_file_max" ]; then queue_file "$s"; return; fi
  # The last read cut the newest boot to the end of the file, settled: the same stat, the same bytes
  # (the last answer stands: no byte read); the same size at other times: rewritten in place, afresh.
  if [ "$c_stat" != - ] && [ "$k" -eq -1 ]; then
    if [ "$st_now" = "$c_stat" ]; then control_line N "$i"; return; fi
    # shellcheck disable=SC2086  # the last read's stat, split into its words on purpose (digits only)
    set -- $c_stat
    if [ "${3-}" = "$s" ] && [ "$st_now" != - ]; then reset_checkpoint; fi
  fi
  # The anchor: the newest boot marker the last read found. If its line is still there, byte
  # for byte, one pass reads only the bytes after it (and, for an older boot, a window before).
  # (An anchor whose lines count from it serves only boots counted from the end.)
  if [ "$c_ino" = "$ino" ] && [ "$c_off" != - ] && [ "$c_off" -lt "$s" ] &&
     { [ "$c_base" = - ] || [ "$k" -lt 0 ]; }; then
    a_off=$c_off a_line=$c_line count_base=$c_base
    t_w=0
    if [ "$t_off" != - ]; then t_w=$((t_off > 4096 ? 4096 : t_off)); fi
    if [ "$t_off" != - ] && [ "$t_off" -le "$s" ] &&
       [ "$(tail -c +$((c_off + 1)) < "$r" | head -c "$c_len")" = "$anchor_text" ] &&
       [ "$(tail -c +$((t_off - t_w + 1)) < "$r" | head -c "$t_w" | cksum)" = "$t_sum" ]; then
      # The anchor and the bytes before t_off are as the last read left them: only what follows is new.
      # Nothing follows, and the newest boot is asked for: the last answer stands (an N line).
      if [ "$t_off" -eq "$s" ] && [ "$k" -eq -1 ]; then control_line N "$i"; mark_settled "$t_off"; return; fi
      # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
      set -- $(tail -c +$((t_off + 1)) < "$r" | phrase_lines -b | cut_boot -v withoff=1 -v lim="$s" -v bo="$t_off" \
        -v bl=$((t_line - 1)) -v bi=$((c_idx - 1)) -v marks=1 -v cont=1 -v first0="$c_line" -v c_off="$c_off")
    else
      # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
      set -- $(tail -c +$((a_off + 1)) < "$r" | phrase_lines -b | cut_boot -v withoff=1 -v lim="$s" -v bo="$a_off" \
        -v bl=$((a_line - 1)) -v bi=$((c_idx - 1)) -v marks=1 -v anchored=1)
    fi
    case ${1-} in
      ok)
        if [ "$5" -ge 0 ]; then last=$5
        elif [ "$6" -lt "$s" ]; then last=$(($7 - 1 + $(count_lines "$6" "$s")))
        else last=$(($7 - 1)); fi
        control_line R "$i" "$4" "$last"
        if [ "$c_base" != - ]; then control_line O "$i" "$c_base" $((-k)); fi
        if [ "$3" -eq "$2" ]; then mark_where_read_stopped "$last"; fi
        return ;;
      # Lines counted from the anchor: a boot before it is searched for from the end.
      range) if [ "$c_base" = - ]; then control_line X "$i" range "$2"; return; fi ;;
      back)
        # A boot before the anchor: a window back from it when it is near, else the plain pass.
        if [ "$3" -gt $((c_idx / 2)) ] && find_marker_before_anchor $((c_idx - $3)); then
          cut_range "$M" "$E" "$L" "$3" "$2"
          if [ "$c_base" != - ]; then control_line O "$i" "$c_base" $((-k)); fi
          return
        fi ;;
    esac
  fi
  if [ "$k" -lt 0 ]; then
    find_boot_from_end $((-k)) && return
  else
    # A boot counted from the start: one pass over the file numbers every boot marker, then
    # only the chosen boot is read.
    # shellcheck disable=SC2046  # split into words on purpose: digits and fixed words (set -f is on)
    set -- $(grep -a -n -b -F -e "$marker" < "$r" |
      awk -v k="$k" -v s="$s" -v nn="$nonce" -v i="$i" -v ino="$ino" "$marks_awk")
    case ${1-} in
      ok) cut_range "$4" "$6" "$5" "$3" "$2"; return ;;
      range) control_line X "$i" range "$2"; return ;;
    esac
  fi
  # No boot marker in the file: boots start at runs of echoed flags (ledger._boot_starts).
  cut_whole_file
}
read_podman_logs() {
  i=$1 k=$2 c=$3 ino=-
  control_line S "$i"
  if ! command -v podman > /dev/null 2>&1; then control_line X "$i" nopodman; return; fi
  # shellcheck disable=SC2086  # time_limit is empty or 'timeout -s KILL <n>': split on purpose
  summary=$({ $time_limit podman logs -- "$c" 2>&1; printf '#%s P %s\n' "$nonce" "$?"; } |
    phrase_lines -e "#$nonce P " -e Error | cut_boot -v withoff=0 -v sent="#$nonce P " -v marks=0)
}
