"""Reading a boot out of a ledger file from its end: bounded memory, cost that follows the boot (I/O).

The pure reader (radiance_mcp.core.ledger) takes text; this package feeds it from a file without
holding the file. The newest boot is found by searching backwards from the end for the last
boot marker, in blocks, and only that boot is scanned: of its lines only those that can hold a
phrase are decoded (found by `grep -F` in a child process in a span of GREP_FROM_BYTES or
more, else here). So a first read costs the newest boot, not the file.

Provenance stays exact. Line numbers are the file's own when they are known cheaply: the bytes
before the boot are at most COUNT_BEFORE_BYTES (then they are counted), or this process has
indexed them (FileIndex: newline and marker counts every INDEX_STEP_BYTES, kept per file and
extended as the file grows). Otherwise the boot's lines count from 1 at its marker line, and
``Boot.lines_from_byte`` is that line's byte offset: line n is
``tail -c +<offset + 1> FILE | sed -n <n>p``; ``Boot.index`` is then -1 (-2 ... for an older
boot) and ``boots_seen`` None. ``index_file`` fills the index (sources/ledgers.py runs it in the
background after such a read), and later reads of that file give the file's line numbers.

A repeat read of an unchanged file (same device, inode, size and mtime, the mtime RACY_NS older
than the last read) parses the lines kept from the last read; a file that grew (the same bytes
at three sampled places) is read only from where the last read stopped; a file that shrank, or
was replaced or rewritten (rotated), is read and indexed afresh. Costs:

- the newest boot (``boot=-1``): the bytes from its marker to the end, twice in C (the search
  back, then the scan); a repeat read, the bytes added since;
- ``boot=-k``: the bytes from the k-th marker from the end to the end (search), and that boot;
- ``boot=k`` (counted from the oldest): one pass over the whole file the first time (it counts
  every marker, and leaves the file indexed), then that boot;
- a file with no boot marker: one pass over the whole file.

Memory: a block (CHUNK_BYTES), a partial line of at most MAX_LINE_BYTES, the lines of one boot
the caller keeps, and 32 bytes of index per INDEX_STEP_BYTES of file, whatever the file holds (a
1 GiB line without a newline, a file of nothing but markers); grep is given no line over
MAX_LINE_BYTES. The caller's checkpoint (a cancel, a time
limit) runs per block. The boot marker and the phrase keywords are parameters of ``cut_boot``,
so another engine's marker can be searched the same way.

What lives where (imports go down this list, never up; nothing here imports sources, the
tools, MCP, the CLI or the simulator; only the core's ledger and errors)::

    blocks.py      the block search and scan: the phrase-needle search (grep -F or here), lines
                   cut out of a span, boot markers searched backwards; CHUNK_BYTES, GREP
    file_index.py  FileIndex: newline and marker counts every INDEX_STEP_BYTES, counted forward
    file_state.py  what this process keeps of each file: identity, samples, index, last read;
                   grown, unchanged or rotated
    reading.py     open_ledger, cut_boot, read_file, index_file: the reads callers make

This package re-exports their public names. A tunable (CHUNK_BYTES, COUNT_BEFORE_BYTES, ...) is
read from its own module: patch it there, not here.
"""

from radiance_mcp.core.boot import CutBoot
from radiance_mcp.sources.ledger_file.blocks import (
    CHUNK_BYTES,
    DEFAULT_NEEDLES,
    GREP,
    GREP_FROM_BYTES,
    SAMPLE_BYTES,
    Keep,
    last_marker_line,
)
from radiance_mcp.sources.ledger_file.file_index import INDEX_STEP_BYTES, FileIndex
from radiance_mcp.sources.ledger_file.file_state import MAX_FILES, MAX_KEPT_BYTES, RACY_NS, forget_files
from radiance_mcp.sources.ledger_file.reading import (
    COUNT_BEFORE_BYTES,
    cut_boot,
    index_file,
    open_ledger,
    read_file,
)

__all__ = [
    "CHUNK_BYTES",
    "COUNT_BEFORE_BYTES",
    "DEFAULT_NEEDLES",
    "GREP",
    "GREP_FROM_BYTES",
    "INDEX_STEP_BYTES",
    "MAX_FILES",
    "MAX_KEPT_BYTES",
    "RACY_NS",
    "SAMPLE_BYTES",
    "CutBoot",
    "FileIndex",
    "Keep",
    "cut_boot",
    "forget_files",
    "index_file",
    "last_marker_line",
    "open_ledger",
    "read_file",
]
