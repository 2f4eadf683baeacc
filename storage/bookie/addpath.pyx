# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The bookie's per-add path, compiled: frame cutting, the plain add's checks, the write cache,
the journal record and the response, for a whole socket read in one call.

`take_adds` walks the frames of a read from a position and takes every plain add (version 2,
ADD_ENTRY, no flags) that is plainly admissible: ids >= 0, a ledger this bookie holds as
writable (`writable`: ledger id -> master key, unfenced ledgers only) under the same master
key, a valid CRC32C digest, a write cache below the point where adds must wait. For each it
puts the entry in the `WriteCache`, writes its journal record into one buffer and its EOK
response into another. It stops at the first frame that is anything else and returns its
position: that frame takes the bookie's general path (`Bookie.add_unacked` and the request
handler), which answers every refusal with its code, so the refusal rules live there once.

One CRC pass per add: the payload's CRC32C is computed once and combined (in GF(2)) with the
CRC of the 32-byte header to check the digest and with that of header and digest to give the
journal record's checksum (`storage.bookie.format`: length u32, CRC32C u32, body), which the
write cache keeps with the entry for its entry-log record.

Also here: `WriteCache` (one half of the write cache: entries in large blocks of C memory, a C
index, no Python object per entry), `frame_records` (entry-log records of a list of bodies) and
`GroupWriter` (the journal's writer thread: pwritev + fdatasync per group, without the GIL),
which also sends each group's runs of EOK responses (`ReplyRun`) on their connections
(`ReplySocket`) as soon as the group's fdatasync returns.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.errno cimport EINTR, EIO, errno
from libc.string cimport memcmp, memcpy, memmove, memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.types cimport time_t
from posix.mman cimport MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_READ, PROT_WRITE, mmap, munmap

from storage.bookie.errors import CorruptEntry, MalformedFrame

cdef extern from "addpath_crc.h":
    void addpath_crc_init()
    uint32_t addpath_crc(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t addpath_x8n(uint64_t n) nogil
    uint32_t addpath_combine(uint32_t crc_a, uint32_t crc_b, uint32_t shift) nogil
    int64_t addpath_be64(const unsigned char *p) nogil
    uint32_t addpath_be32(const unsigned char *p) nogil
    void addpath_put_be32(unsigned char *p, uint32_t v) nogil

addpath_crc_init()

cdef extern from "Python.h":
    # Owned references handled by hand: a bytes object is filled, then cut to its length.
    PyObject *new_bytes "PyBytes_FromStringAndSize"(const char *, Py_ssize_t)
    int _PyBytes_Resize(PyObject **, Py_ssize_t)
    void Py_XDECREF(PyObject *)


cdef object _finish(PyObject **raw, Py_ssize_t size):
    """The bytes object at *raw cut to `size` bytes, as an object (the raw reference is
    handed over)."""
    if _PyBytes_Resize(raw, size) < 0:  # it released the object and set the error
        raw[0] = NULL
        raise MemoryError()
    result = <object>raw[0]
    Py_XDECREF(raw[0])
    raw[0] = NULL
    return result

# The V2 layout (storage.bookie.protocol, storage.bookie.format)
DEF HEADER_LEN = 32          # packaged entry: ledger, entry, LAC, length (i64 each)
DEF ENTRY_OVERHEAD = 36      # ... then the CRC32C digest (u32), then the payload
DEF MASTER_KEY_LEN = 20
DEF ADD_IDS_AT = 24          # add body: header u32, master key, then the packaged entry
DEF ADD_MIN_BODY = ADD_IDS_AT + ENTRY_OVERHEAD
DEF PLAIN_ADD_HEADER = 0x02010000  # version 2, ADD_ENTRY, flags 0
DEF RESPONSE_LEN = 28        # frame length, header, result, ledger id, entry id
DEF RESPONSE_BODY = 24
DEF ADD_RESPONSE_HEAD = 0x02010000
DEF RECORD_HEADER_LEN = 8

cdef uint64_t _shift_len = 0
cdef uint32_t _shift = 0x80000000u  # x^0


cdef inline uint32_t _shift_for(uint64_t n) noexcept:
    """x^(8 n) mod P, kept for the last length seen (a writer's entries share one)."""
    global _shift_len, _shift
    if n != _shift_len:
        _shift = addpath_x8n(n)
        _shift_len = n
    return _shift


cdef const unsigned char[::1] _view(object data):
    """A contiguous byte view of `data`; None is refused (a typed view would take it as
    empty)."""
    if data is None:
        raise TypeError("a bytes-like object is required, not 'NoneType'")
    return data


def crc32c(data, uint32_t value=0):
    """CRC32C of `data` (bytes-like) continuing `value`, as the `crc32c` wheel computes it."""
    cdef const unsigned char[::1] view = _view(data)
    return addpath_crc(value, &view[0] if view.shape[0] else NULL, view.shape[0])


def entry_digest(packaged):
    """The CRC32C digest of a packaged entry: over its first 32 bytes, then its payload."""
    cdef const unsigned char[::1] view = _view(packaged)
    cdef Py_ssize_t n = view.shape[0]
    if n < ENTRY_OVERHEAD:
        raise CorruptEntry(f"entry of {n} bytes is shorter than its header")
    cdef uint32_t head = addpath_crc(0, &view[0], HEADER_LEN)
    return addpath_crc(head, &view[0] + ENTRY_OVERHEAD, n - ENTRY_OVERHEAD)


def record_header(body):
    """The record header of `body`: length and CRC32C, big-endian u32 each."""
    cdef const unsigned char[::1] view = _view(body)
    cdef Py_ssize_t n = view.shape[0]
    cdef bytes header = PyBytes_FromStringAndSize(NULL, RECORD_HEADER_LEN)
    cdef unsigned char *out = <unsigned char *>PyBytes_AS_STRING(header)
    addpath_put_be32(out, <uint32_t>n)
    addpath_put_be32(out + 4, addpath_crc(0, &view[0] if n else NULL, n))
    return header


cpdef tuple frames_end(bytes buf, Py_ssize_t pos, Py_ssize_t max_frame):
    """(end of the last whole frame from `pos`, bytes the frame after it needs in all, or 0);
    MalformedFrame on a length below 4 or above `max_frame`."""
    if buf is None:
        raise TypeError("a bytes buffer is required, not None")
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t total = PyBytes_GET_SIZE(buf)
    cdef uint32_t size
    if pos < 0 or pos > total:
        raise ValueError(f"position {pos} outside a buffer of {total} bytes")
    if max_frame < 4:
        raise ValueError(f"maximum frame length {max_frame} below 4")
    while total - pos >= 4:
        size = addpath_be32(p + pos)
        if size < 4 or size > <uint64_t>max_frame:
            raise MalformedFrame(f"frame length {size} out of range")
        if pos + 4 + <Py_ssize_t>size > total:
            return pos, 4 + <Py_ssize_t>size
        pos += 4 + size
    return pos, (4 if pos < total else 0)


cpdef list frame_spans(bytes buf, Py_ssize_t pos, Py_ssize_t end):
    """The (start, end) of each frame body between `pos` and `end` (whole frames, as
    `frames_end` found them; ValueError if they are not)."""
    if buf is None:
        raise TypeError("a bytes buffer is required, not None")
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef list spans = []
    cdef Py_ssize_t size
    if pos < 0 or end > PyBytes_GET_SIZE(buf) or pos > end:
        raise ValueError(f"span {pos}:{end} outside a buffer of {PyBytes_GET_SIZE(buf)} bytes")
    while pos < end:
        if end - pos < 4:
            raise ValueError(f"a frame length cut at {end}")
        size = addpath_be32(p + pos)
        if size > end - pos - 4:
            raise ValueError(f"a frame of {size} bytes at {pos} runs past {end}")
        spans.append((pos + 4, pos + 4 + size))
        pos += 4 + size
    return spans


def with_result(bytes responses not None, int code):
    """A run of add responses (`take_adds`) with every result replaced by `code`."""
    cdef bytes out = PyBytes_FromStringAndSize(PyBytes_AS_STRING(responses),
                                               PyBytes_GET_SIZE(responses))
    cdef unsigned char *p = <unsigned char *>PyBytes_AS_STRING(out)
    cdef Py_ssize_t at
    for at in range(0, PyBytes_GET_SIZE(out) - RESPONSE_LEN + 1, RESPONSE_LEN):
        addpath_put_be32(p + at + 8, <uint32_t>code)
    return out


cdef inline void _put_be64(unsigned char *p, uint64_t v) noexcept nogil:
    addpath_put_be32(p, <uint32_t>(v >> 32))
    addpath_put_be32(p + 4, <uint32_t>v)


# The write cache's storage: entries are copied into BLOCK_SIZE blocks (an entry of
# OWN_BLOCK_AT bytes or more into a block of its own) and found through an open-addressing
# table of (ledger, entry) -> record; a second table keeps each ledger's last entry id.
DEF BLOCK_SIZE = 1048576
DEF OWN_BLOCK_AT = 262144
DEF POOL_BLOCKS = 128        # emptied blocks kept for the next half (64 MiB cache: ~1.5x)
DEF FIRST_RECORDS = 1024
DEF FIRST_LEDGERS = 64
DEF NO_RECORD = -1
DEF NO_LEDGER = -1
DEF DROPPED = -1


cdef struct Record:
    int64_t ledger
    int64_t entry
    unsigned char *data
    Py_ssize_t length          # DROPPED once its ledger was dropped
    uint32_t crc               # CRC32C of the bytes: its entry-log record's checksum


cdef struct Block:
    unsigned char *base
    size_t size


cdef struct LedgerLast:
    int64_t ledger             # NO_LEDGER: a free slot
    int64_t last


cdef struct SortKey:
    int64_t ledger
    int64_t entry
    Py_ssize_t record


# Emptied blocks, handed from a released half to the next one: a fresh mapping costs a page
# fault per 4 KiB touched. Both threads that use it (the event loop filling, the flush thread
# releasing) hold the GIL while they do.
cdef unsigned char *_pool[POOL_BLOCKS]
cdef Py_ssize_t _pooled = 0


cdef inline size_t _key_hash(int64_t ledger, int64_t entry) noexcept nogil:
    cdef uint64_t h = (<uint64_t>ledger * 0x9E3779B97F4A7C15ULL) ^ (
        (<uint64_t>entry + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL)
    return <size_t>(h ^ (h >> 31))


cdef unsigned char *_map(size_t size) noexcept nogil:
    cdef void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    return NULL if p == MAP_FAILED else <unsigned char *>p


cdef int _compare_keys(const void *a, const void *b) noexcept nogil:
    cdef const SortKey *x = <const SortKey *>a
    cdef const SortKey *y = <const SortKey *>b
    if x.ledger != y.ledger:
        return -1 if x.ledger < y.ledger else 1
    if x.entry != y.entry:
        return -1 if x.entry < y.entry else 1
    return 0


cdef class WriteCache:
    """One half of the bookie's write cache, in C memory: the entries' bytes in large blocks,
    an index (ledger, entry) -> bytes, each ledger's last entry id; no Python object per
    entry. `size` is the bytes of its entries, `entries` their number, `mapped` the bytes of
    blocks it holds (entries plus each block's unused tail).

    One thread writes it (the event loop); the checkpoint's thread reads a half that is no
    longer written (`sort`, `frame_sorted`) and empties it (`release`), which detaches
    everything under the GIL first, so a concurrent `get` finds either the entry or nothing
    (and then the index has it)."""

    cdef Record *records
    cdef Py_ssize_t used, records_cap      # records (live and dropped), allocated
    cdef Py_ssize_t *slots                  # record index or NO_RECORD
    cdef size_t slots_mask
    cdef LedgerLast *lasts
    cdef size_t lasts_mask
    cdef Py_ssize_t ledgers
    cdef Block *blocks
    cdef Py_ssize_t nblocks, blocks_cap
    cdef unsigned char *fill               # the free tail of the current block
    cdef size_t room
    cdef SortKey *order                    # `sort`'s result, NULL until then
    cdef Py_ssize_t ordered
    cdef readonly Py_ssize_t size
    cdef readonly Py_ssize_t entries
    cdef readonly Py_ssize_t mapped

    def __cinit__(self):
        self._empty_tables()

    def __dealloc__(self):
        self._free_all()

    cdef int _empty_tables(self) except -1:
        cdef size_t i
        self.records = <Record *>malloc(FIRST_RECORDS * sizeof(Record))
        self.slots = <Py_ssize_t *>malloc(2 * FIRST_RECORDS * sizeof(Py_ssize_t))
        self.lasts = <LedgerLast *>malloc(FIRST_LEDGERS * sizeof(LedgerLast))
        self.blocks = <Block *>malloc(64 * sizeof(Block))
        if self.records == NULL or self.slots == NULL or self.lasts == NULL or self.blocks == NULL:
            free(self.records)
            free(self.slots)
            free(self.lasts)
            free(self.blocks)
            self.records = NULL
            self.slots = NULL
            self.lasts = NULL
            self.blocks = NULL
            raise MemoryError()
        self.used, self.records_cap = 0, FIRST_RECORDS
        self.slots_mask = 2 * FIRST_RECORDS - 1
        for i in range(2 * FIRST_RECORDS):
            self.slots[i] = NO_RECORD
        self.lasts_mask = FIRST_LEDGERS - 1
        for i in range(FIRST_LEDGERS):
            self.lasts[i].ledger = NO_LEDGER
        self.ledgers = 0
        self.nblocks, self.blocks_cap = 0, 64
        self.fill, self.room = NULL, 0
        self.order, self.ordered = NULL, 0
        self.size = self.entries = self.mapped = 0
        return 0

    cdef void _free_all(self) noexcept:
        """Everything this half holds, detached under the GIL (a reader sees an empty half
        or a whole one), blocks to the pool while it has room, the rest unmapped without the
        GIL."""
        global _pooled
        cdef Block *blocks = self.blocks
        cdef Py_ssize_t nblocks = self.nblocks, i
        cdef Record *records = self.records
        cdef Py_ssize_t *slots = self.slots
        cdef LedgerLast *lasts = self.lasts
        cdef SortKey *order = self.order
        self.blocks = NULL
        self.records = NULL
        self.slots = NULL
        self.lasts = NULL
        self.order = NULL
        self.nblocks = self.blocks_cap = self.used = self.records_cap = self.ledgers = 0
        self.slots_mask = self.lasts_mask = 0
        self.fill, self.room = NULL, 0
        self.ordered = self.size = self.entries = self.mapped = 0
        for i in range(nblocks):
            if blocks[i].size == BLOCK_SIZE and _pooled < POOL_BLOCKS:
                _pool[_pooled] = blocks[i].base
                _pooled += 1
                blocks[i].base = NULL
        with nogil:
            for i in range(nblocks):
                if blocks[i].base != NULL:
                    munmap(blocks[i].base, blocks[i].size)
            free(blocks)
            free(records)
            free(slots)
            free(lasts)
            free(order)

    cdef unsigned char *_alloc(self, size_t n) noexcept:
        """`n` bytes in this half's blocks; NULL when memory ran out."""
        global _pooled
        cdef unsigned char *p
        cdef size_t size = n if n >= OWN_BLOCK_AT else BLOCK_SIZE
        cdef Block *grown
        if n < OWN_BLOCK_AT and n <= self.room:
            p = self.fill
            self.fill += n
            self.room -= n
            return p
        if self.nblocks == self.blocks_cap:
            grown = <Block *>realloc(self.blocks, 2 * self.blocks_cap * sizeof(Block))
            if grown == NULL:
                return NULL
            self.blocks, self.blocks_cap = grown, 2 * self.blocks_cap
        if size == BLOCK_SIZE and _pooled:
            _pooled -= 1
            p = _pool[_pooled]
        else:
            p = _map(size)
            if p == NULL:
                return NULL
        self.blocks[self.nblocks].base = p
        self.blocks[self.nblocks].size = size
        self.nblocks += 1
        self.mapped += size
        if size == BLOCK_SIZE:
            self.fill, self.room = p + n, BLOCK_SIZE - n
        return p

    cdef inline Py_ssize_t _find(self, int64_t ledger, int64_t entry) noexcept nogil:
        cdef size_t i
        cdef Py_ssize_t r
        if self.slots == NULL:
            return NO_RECORD
        i = _key_hash(ledger, entry) & self.slots_mask
        while True:
            r = self.slots[i]
            if r == NO_RECORD or (self.records[r].ledger == ledger
                                  and self.records[r].entry == entry):
                return r
            i = (i + 1) & self.slots_mask

    cdef int _index_records(self, size_t capacity) noexcept:
        """The (ledger, entry) table rebuilt with `capacity` slots (a power of two) from the
        live records; -1 when memory ran out (the old table is kept)."""
        cdef Py_ssize_t *slots = <Py_ssize_t *>malloc(capacity * sizeof(Py_ssize_t))
        cdef size_t i, mask = capacity - 1
        cdef Py_ssize_t r
        if slots == NULL:
            return -1
        for i in range(capacity):
            slots[i] = NO_RECORD
        for r in range(self.used):
            if self.records[r].length != DROPPED:
                i = _key_hash(self.records[r].ledger, self.records[r].entry) & mask
                while slots[i] != NO_RECORD:
                    i = (i + 1) & mask
                slots[i] = r
        free(self.slots)
        self.slots, self.slots_mask = slots, mask
        return 0

    cdef int _index_ledgers(self, size_t capacity) noexcept:
        """The last-entry table rebuilt with `capacity` slots from the live records."""
        cdef LedgerLast *lasts = <LedgerLast *>malloc(capacity * sizeof(LedgerLast))
        cdef LedgerLast *old = self.lasts
        cdef size_t i, old_mask = self.lasts_mask
        cdef Py_ssize_t r
        if lasts == NULL:
            return -1
        for i in range(capacity):
            lasts[i].ledger = NO_LEDGER
        self.lasts, self.lasts_mask, self.ledgers = lasts, capacity - 1, 0
        for r in range(self.used):
            if self.records[r].length != DROPPED:
                self._note_last(self.records[r].ledger, self.records[r].entry)
        free(old)
        return 0

    cdef inline void _note_last(self, int64_t ledger, int64_t entry) noexcept:
        """(The table has room: `_insert` grows it first.)"""
        cdef size_t i = _key_hash(ledger, 0) & self.lasts_mask
        while self.lasts[i].ledger != NO_LEDGER and self.lasts[i].ledger != ledger:
            i = (i + 1) & self.lasts_mask
        if self.lasts[i].ledger == NO_LEDGER:
            self.lasts[i].ledger, self.lasts[i].last = ledger, entry
            self.ledgers += 1
        elif entry > self.lasts[i].last:
            self.lasts[i].last = entry

    cdef int _insert(self, int64_t ledger, int64_t entry, const unsigned char *src,
                     Py_ssize_t n, uint32_t crc) noexcept:
        """Copy an entry in (replacing one under the same ids), with `crc`, the CRC32C of its
        bytes (the add path has it from the journal record); -1 when memory ran out, and then
        nothing changed."""
        cdef Py_ssize_t r
        cdef size_t i
        cdef Record *grown
        cdef unsigned char *p
        if self.records == NULL and self._reopen() < 0:
            return -1
        if <size_t>(self.ledgers + 1) * 2 > self.lasts_mask + 1:
            if self._index_ledgers(2 * (self.lasts_mask + 1)) < 0:
                return -1
        if self.used == self.records_cap:
            grown = <Record *>realloc(self.records, 2 * self.records_cap * sizeof(Record))
            if grown == NULL:
                return -1
            self.records, self.records_cap = grown, 2 * self.records_cap
        if <size_t>(self.used + 1) * 2 > self.slots_mask + 1:
            if self._index_records(2 * (self.slots_mask + 1)) < 0:
                return -1
        p = self._alloc(n) if n else self.fill
        if p == NULL and n:
            return -1
        if n:
            memcpy(p, src, n)
        if self.order != NULL:  # a later put makes a sorted walk stale
            free(self.order)
            self.order, self.ordered = NULL, 0
        r = self._find(ledger, entry)
        if r != NO_RECORD:
            self.size += n - self.records[r].length
            self.records[r].data, self.records[r].length = p, n
            self.records[r].crc = crc
        else:
            r = self.used
            self.used += 1
            self.records[r].ledger, self.records[r].entry = ledger, entry
            self.records[r].data, self.records[r].length = p, n
            self.records[r].crc = crc
            i = _key_hash(ledger, entry) & self.slots_mask
            while self.slots[i] != NO_RECORD:
                i = (i + 1) & self.slots_mask
            self.slots[i] = r
            self.entries += 1
            self.size += n
        self._note_last(ledger, entry)
        return 0

    cdef int _reopen(self) noexcept:
        try:
            self._empty_tables()
        except MemoryError:
            return -1
        return 0

    def put(self, int64_t ledger_id, int64_t entry_id, bytes entry not None) -> None:
        """Cache an entry (replacing one under the same ids); ValueError for a negative id."""
        if ledger_id < 0 or entry_id < 0:
            raise ValueError(f"negative id: ledger {ledger_id}, entry {entry_id}")
        cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(entry)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(entry)
        if self._insert(ledger_id, entry_id, p, n, addpath_crc(0, p if n else NULL, n)) < 0:
            raise MemoryError()

    def get(self, int64_t ledger_id, int64_t entry_id):
        """The entry's bytes (a copy), or None."""
        cdef Py_ssize_t r = self._find(ledger_id, entry_id)
        if r == NO_RECORD:
            return None
        return PyBytes_FromStringAndSize(<const char *>self.records[r].data,
                                         self.records[r].length)

    def __contains__(self, key) -> bool:
        ledger_id, entry_id = key
        return self._find(ledger_id, entry_id) != NO_RECORD

    def last_entry(self, int64_t ledger_id) -> int:
        """The ledger's largest entry id here, or -1."""
        cdef size_t i
        if self.lasts == NULL:
            return -1
        i = _key_hash(ledger_id, 0) & self.lasts_mask
        while self.lasts[i].ledger != NO_LEDGER:
            if self.lasts[i].ledger == ledger_id:
                return self.lasts[i].last
            i = (i + 1) & self.lasts_mask
        return -1

    def entry_ids(self, int64_t ledger_id) -> list:
        """The ledger's entry ids here, in the order they first arrived."""
        cdef list ids = []
        cdef Py_ssize_t r
        for r in range(self.used):
            if self.records[r].ledger == ledger_id and self.records[r].length != DROPPED:
                ids.append(self.records[r].entry)
        return ids

    def items(self) -> list:
        """Every (ledger, entry, bytes), in arrival order (tests and diagnostics)."""
        cdef list out = []
        cdef Py_ssize_t r
        for r in range(self.used):
            if self.records[r].length != DROPPED:
                out.append((self.records[r].ledger, self.records[r].entry,
                            PyBytes_FromStringAndSize(<const char *>self.records[r].data,
                                                      self.records[r].length)))
        return out

    def drop(self, ledger_ids: set) -> None:
        """Forget the entries of these ledgers (their bytes stay in the blocks until
        `release`)."""
        cdef Py_ssize_t r
        cdef bint dropped = False
        for r in range(self.used):
            if self.records[r].length != DROPPED and self.records[r].ledger in ledger_ids:
                self.size -= self.records[r].length
                self.records[r].length = DROPPED
                self.entries -= 1
                dropped = True
        if dropped:
            if (self._index_records(self.slots_mask + 1) < 0
                    or self._index_ledgers(self.lasts_mask + 1) < 0):
                raise MemoryError()
            if self.order != NULL:
                free(self.order)
                self.order, self.ordered = NULL, 0

    def restore_into(self, WriteCache other not None) -> None:
        """Put into `other` every entry of this half that `other` does not hold (a failed
        checkpoint's half back into the filling one)."""
        cdef Py_ssize_t r
        for r in range(self.used):
            if (self.records[r].length != DROPPED
                    and other._find(self.records[r].ledger, self.records[r].entry) == NO_RECORD
                    and other._insert(self.records[r].ledger, self.records[r].entry,
                                      self.records[r].data, self.records[r].length,
                                      self.records[r].crc) < 0):
                raise MemoryError()

    def release(self) -> None:
        """Empty this half: its tables freed and its blocks pooled or unmapped (outside the
        GIL); it takes entries again afterwards."""
        self._free_all()

    def sort(self) -> int:
        """Order the entries by (ledger, entry) for `frame_sorted`, without the GIL; returns
        their number."""
        cdef Py_ssize_t r, n = 0
        cdef SortKey *order
        free(self.order)
        self.order, self.ordered = NULL, 0
        if not self.entries:
            return 0
        order = <SortKey *>malloc(self.entries * sizeof(SortKey))
        if order == NULL:
            raise MemoryError()
        for r in range(self.used):
            if self.records[r].length != DROPPED:
                order[n].ledger = self.records[r].ledger
                order[n].entry = self.records[r].entry
                order[n].record = r
                n += 1
        with nogil:
            qsort(order, n, sizeof(SortKey), _compare_keys)
        self.order, self.ordered = order, n
        return n

    def frame_sorted(self, Py_ssize_t first, Py_ssize_t stop, uint32_t log_id,
                     Py_ssize_t offset, Py_ssize_t limit, Py_ssize_t chunk_end,
                     list keys not None):
        """`frame_records` over the sorted entries [first, stop) (`sort`), framed from the
        blocks without the GIL with the CRCs kept at `put` (no second pass over the bytes);
        each entry's index key (`Index.key`) appended to `keys`."""
        cdef Py_ssize_t i, last, at = offset, total = 0, used = 0, size
        cdef Record *rec
        cdef unsigned char *out
        cdef bytes run, location, key
        cdef unsigned char *loc
        cdef list locations = []
        if first < 0 or first > self.ordered:
            raise ValueError(f"first index {first} outside 0..{self.ordered}")
        if stop > self.ordered:
            stop = self.ordered
        i = first
        while i < stop and at < limit:
            size = self.records[self.order[i].record].length
            total += RECORD_HEADER_LEN + size
            at += RECORD_HEADER_LEN + size
            i += 1
            if at >= chunk_end:
                break
        last = i
        run = PyBytes_FromStringAndSize(NULL, total)
        out = <unsigned char *>PyBytes_AS_STRING(run)
        with nogil:
            for i in range(first, last):
                rec = &self.records[self.order[i].record]
                addpath_put_be32(out + used, <uint32_t>rec.length)
                addpath_put_be32(out + used + 4, rec.crc)
                memcpy(out + used + RECORD_HEADER_LEN, rec.data, rec.length)
                used += RECORD_HEADER_LEN + rec.length
        at = offset
        for i in range(first, last):
            rec = &self.records[self.order[i].record]
            location = PyBytes_FromStringAndSize(NULL, 16)
            loc = <unsigned char *>PyBytes_AS_STRING(location)
            addpath_put_be32(loc, log_id)
            _put_be64(loc + 4, <uint64_t>(at + RECORD_HEADER_LEN))
            addpath_put_be32(loc + 12, <uint32_t>rec.length)
            locations.append(location)
            key = PyBytes_FromStringAndSize(NULL, 16)
            loc = <unsigned char *>PyBytes_AS_STRING(key)
            _put_be64(loc, <uint64_t>rec.ledger)
            _put_be64(loc + 8, <uint64_t>rec.entry)
            keys.append(key)
            at += RECORD_HEADER_LEN + rec.length
        return last, at, run, locations


def take_adds(bytes buf not None, Py_ssize_t pos, Py_ssize_t end, dict writable not None,
              WriteCache cache not None, Py_ssize_t wait_at):
    """Take the admissible plain adds of the whole frames in buf[pos:end] (see the module's
    docstring), stopping at the first other frame or when the cache reaches `wait_at` bytes.

    Returns (position of the first frame not taken, adds taken, their entries' bytes, their
    journal records, their EOK responses); the last two are one bytes object each."""
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef const unsigned char *body
    cdef const unsigned char *entry
    cdef Py_ssize_t size, entry_len, count = 0, entry_bytes = 0
    cdef int64_t ledger_c, entry_c
    cdef uint32_t head_crc, payload_crc, shift, entry_crc
    cdef PyObject *key
    cdef object ledger_id
    # Worst cases: a record is its entry plus 8 bytes (< its frame: 4 + 24 + entry), one
    # response per frame of at least 4 + ADD_MIN_BODY bytes.
    if pos < 0 or end > PyBytes_GET_SIZE(buf) or pos > end:
        raise ValueError(f"span {pos}:{end} outside a buffer of {PyBytes_GET_SIZE(buf)} bytes")
    cdef Py_ssize_t room = end - pos
    cdef PyObject *records = new_bytes(NULL, room)
    cdef PyObject *responses = new_bytes(NULL, (room // (4 + ADD_MIN_BODY) + 1) * RESPONSE_LEN)
    if records is NULL or responses is NULL:
        Py_XDECREF(records)
        Py_XDECREF(responses)
        raise MemoryError()
    cdef unsigned char *record_at = <unsigned char *>PyBytes_AS_STRING(<object>records)
    cdef unsigned char *response_at = <unsigned char *>PyBytes_AS_STRING(<object>responses)
    cdef Py_ssize_t records_len = 0, responses_len = 0
    try:
        while end - pos >= 4:
            size = addpath_be32(p + pos)
            body = p + pos + 4
            if size < ADD_MIN_BODY or size > end - pos - 4:
                break
            if addpath_be32(body) != PLAIN_ADD_HEADER or cache.size >= wait_at:
                break
            entry = body + ADD_IDS_AT
            entry_len = size - ADD_IDS_AT
            ledger_c = addpath_be64(entry)
            entry_c = addpath_be64(entry + 8)
            if ledger_c < 0 or entry_c < 0:
                break
            ledger_id = ledger_c
            key = PyDict_GetItem(writable, ledger_id)
            if key is NULL or not isinstance(<object>key, bytes) or PyBytes_GET_SIZE(
                    <bytes>key) != MASTER_KEY_LEN or memcmp(
                    PyBytes_AS_STRING(<bytes>key), body + 4, MASTER_KEY_LEN) != 0:
                break
            # One pass over the payload: its CRC, combined with the header's for the digest
            # and with header + digest's for the journal record.
            payload_crc = addpath_crc(0, entry + ENTRY_OVERHEAD, entry_len - ENTRY_OVERHEAD)
            shift = _shift_for(entry_len - ENTRY_OVERHEAD)
            head_crc = addpath_crc(0, entry, HEADER_LEN)
            if addpath_combine(head_crc, payload_crc, shift) != addpath_be32(entry + HEADER_LEN):
                break
            head_crc = addpath_crc(head_crc, entry + HEADER_LEN, 4)
            entry_crc = addpath_combine(head_crc, payload_crc, shift)
            if cache._insert(ledger_c, entry_c, entry, entry_len, entry_crc) < 0:
                raise MemoryError()
            addpath_put_be32(record_at + records_len, <uint32_t>entry_len)
            addpath_put_be32(record_at + records_len + 4, entry_crc)
            memcpy(record_at + records_len + RECORD_HEADER_LEN, entry, entry_len)
            records_len += RECORD_HEADER_LEN + entry_len
            addpath_put_be32(response_at + responses_len, RESPONSE_BODY)
            addpath_put_be32(response_at + responses_len + 4, ADD_RESPONSE_HEAD)
            addpath_put_be32(response_at + responses_len + 8, 0)
            memcpy(response_at + responses_len + 12, entry, 16)
            responses_len += RESPONSE_LEN
            count += 1
            entry_bytes += entry_len
            pos += 4 + size
        records_out = _finish(&records, records_len)
        responses_out = _finish(&responses, responses_len)
    finally:
        Py_XDECREF(records)
        Py_XDECREF(responses)
    return pos, count, entry_bytes, records_out, responses_out


def frame_records(list bodies not None, Py_ssize_t first, Py_ssize_t stop, uint32_t log_id,
                  Py_ssize_t offset, Py_ssize_t limit, Py_ssize_t chunk_end):
    """Entry-log records (`record_header` + body) of bodies[first:stop] from `offset` of log
    `log_id`, joined into one buffer; stops before a record when `offset` has reached `limit`
    (the log is full) and after one when it has reached `chunk_end`. Returns (index of the
    next body, offset after the run, the run, the records' locations as `Location.encode`
    packs them: log id u32, body offset u64, body size u32, big-endian)."""
    cdef Py_ssize_t i, total = 0, size
    if first < 0:
        raise ValueError(f"first index {first} below 0")
    # A copy of the bodies, each checked to be bytes, sized here and framed below: the loop
    # allocates, so other threads may run and change `bodies` meanwhile.
    cdef tuple chosen = tuple(bodies[first:stop])
    cdef object item
    for item in chosen:
        if type(item) is not bytes:
            raise TypeError(f"an entry-log record body must be bytes, not {type(item).__name__}")
        total += RECORD_HEADER_LEN + PyBytes_GET_SIZE(item)
    stop = first + len(chosen)
    cdef bytes run = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char *out = <unsigned char *>PyBytes_AS_STRING(run)
    cdef Py_ssize_t used = 0
    cdef list locations = []
    cdef bytes body, location
    cdef unsigned char *loc
    i = first
    while i < stop and offset < limit:
        body = <bytes>chosen[i - first]
        size = PyBytes_GET_SIZE(body)
        addpath_put_be32(out + used, <uint32_t>size)
        addpath_put_be32(out + used + 4, addpath_crc(
            0, <const unsigned char *>PyBytes_AS_STRING(body), size))
        memcpy(out + used + RECORD_HEADER_LEN, PyBytes_AS_STRING(body), size)
        location = PyBytes_FromStringAndSize(NULL, 16)
        loc = <unsigned char *>PyBytes_AS_STRING(location)
        addpath_put_be32(loc, log_id)
        _put_be64(loc + 4, <uint64_t>(offset + RECORD_HEADER_LEN))
        addpath_put_be32(loc + 12, <uint32_t>size)
        locations.append(location)
        used += RECORD_HEADER_LEN + size
        offset += RECORD_HEADER_LEN + size
        i += 1
        if offset >= chunk_end:
            break
    if used != total:
        run = run[:used]
    return i, offset, run, locations


# -- the journal's writer thread ---------------------------------------------------------------
# (storage.bookie.journal): groups of records written with pwritev and synced with fdatasync by
# a thread that never takes the GIL; each finished group is queued for the event loop and
# signalled on an eventfd, so the loop wakes once per group and the thread never waits for
# Python.

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    ctypedef struct pthread_condattr_t:
        pass
    ctypedef struct pthread_mutexattr_t:
        pass
    int PTHREAD_MUTEX_RECURSIVE
    int pthread_mutexattr_init(pthread_mutexattr_t *)
    int pthread_mutexattr_settype(pthread_mutexattr_t *, int)
    int pthread_mutexattr_destroy(pthread_mutexattr_t *)
    int pthread_create(pthread_t *, const void *, void *(*)(void *) noexcept nogil, void *)
    int pthread_join(pthread_t, void **)
    int pthread_mutex_init(pthread_mutex_t *, const void *)
    int pthread_mutex_lock(pthread_mutex_t *)
    int pthread_mutex_unlock(pthread_mutex_t *)
    int pthread_mutex_destroy(pthread_mutex_t *)
    int pthread_condattr_init(pthread_condattr_t *)
    int pthread_condattr_setclock(pthread_condattr_t *, int)
    int pthread_condattr_destroy(pthread_condattr_t *)
    int pthread_cond_init(pthread_cond_t *, const pthread_condattr_t *)
    int pthread_cond_wait(pthread_cond_t *, pthread_mutex_t *)
    int pthread_cond_timedwait(pthread_cond_t *, pthread_mutex_t *, const timespec *)
    int pthread_cond_signal(pthread_cond_t *)
    int pthread_cond_broadcast(pthread_cond_t *)
    int pthread_cond_destroy(pthread_cond_t *)

cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int, int)
    int EFD_NONBLOCK
    int EFD_CLOEXEC

cdef extern from "<sys/uio.h>" nogil:
    cdef struct iovec:
        void *iov_base
        size_t iov_len
    ssize_t pwritev(int, const iovec *, int, long)

cdef extern from "<fcntl.h>" nogil:
    int fcntl(int, int, ...)
    int F_DUPFD_CLOEXEC
    int posix_fallocate(int, long, long)
    int c_open "open"(const char *, int, ...)
    int O_RDWR
    int O_CREAT
    int O_EXCL
    int O_RDONLY
    int O_CLOEXEC
    int O_DIRECT

cdef extern from "<unistd.h>" nogil:
    int fdatasync(int)
    int fsync(int)
    int c_close "close"(int)
    ssize_t c_read "read"(int, void *, size_t)
    ssize_t c_write "write"(int, const void *, size_t)
    ssize_t c_pwrite "pwrite"(int, const void *, size_t, long)

cdef extern from "<sys/socket.h>" nogil:
    cdef struct msghdr:
        iovec *msg_iov
        size_t msg_iovlen
    ssize_t sendmsg(int, const msghdr *, int)
    int MSG_DONTWAIT
    int MSG_NOSIGNAL

cdef extern from "<stdio.h>" nogil:
    int snprintf(char *, size_t, const char *, ...)

DEF PATH_MAX_LEN = 4096
DEF IOV_PIECE = 1024          # iovecs per pwritev (IOV_MAX on Linux)
DEF PAGE = 4096               # groups are padded with zeros to this boundary in zeroed space
DEF ZERO_CHUNK = 1048576      # bytes of zeros the filler writes (and syncs) at a time

cdef char _zero_page[PAGE]    # static storage: all zeros


cdef struct Batch:
    Batch *next
    iovec *iov
    Py_ssize_t count
    size_t size
    size_t records
    uint64_t token
    Reply *replies             # runs of responses sent once the batch's group is synced
    Py_ssize_t reply_count


cdef struct ReplyState:
    # One connection's socket as the journal's writer sees it (`ReplySocket`). The writer and
    # the event loop write whole runs of frames, never interleaved: each writes holding
    # `lock`; the writer writes only while the loop's transport holds nothing unsent
    # (`loop_busy` clear) and the loop owes no run the writer left to it (`owed`), so runs
    # leave in the order their groups were synced. When the socket takes only part of a run
    # the writer sets `held`: the loop then writes that run's rest before anything else
    # (`ReplySocket.send_rest`).
    pthread_mutex_t lock
    int fd                     # a duplicate of the connection's socket; -1 once closed
    int loop_busy
    int held
    Py_ssize_t owed            # runs left (wholly or partly) to the loop, not yet written


cdef struct Reply:
    ReplyState *socket
    const char *data
    size_t size
    Py_ssize_t *sent           # the writer's answer: bytes it sent (0: none, the loop sends)


cdef struct Synced:
    Synced *next
    uint64_t token             # the group's last batch
    int error                  # errno of its write or sync, or 0
    int64_t sync_ns            # its fdatasync's duration
    size_t size
    size_t records
    int64_t file_id            # the journal mark after it
    int64_t end


cdef struct WriterState:
    pthread_mutex_t lock
    pthread_cond_t wake
    Batch *head
    Batch *tail
    size_t queued_bytes
    size_t queued_records
    int64_t oldest_ns
    Synced *synced_head
    Synced *synced_tail
    int closing
    int event_fd
    int fd
    int64_t file_id
    int64_t offset
    int64_t allocated
    int64_t wait_ns
    size_t threshold
    int flush_when_empty
    int64_t max_size
    int64_t prealloc
    # The zero filler (`_filler_run`): the current file holds zeros, written and synced,
    # from `claim` (the end of the last group written, rounded up to PAGE) to `zeroed`; it
    # writes more while `zeroed` is less than one preallocation step past `claim`. `filling`
    # while a chunk at `fill_at` of file `fill_file` is being written (the writer waits for
    # it before writing a group over it). Both threads hold `lock` to read or change these.
    pthread_cond_t fill_wake
    pthread_cond_t filled
    int64_t zeroed
    int64_t claim
    int filling
    int64_t fill_at
    int64_t fill_file
    uint64_t groups_past_zeroed
    char directory[PATH_MAX_LEN]


cdef inline int64_t _fill_target(WriterState *s) noexcept nogil:
    """Where the filler stops: the preallocation step boundary at least one step past
    `claim`. The writer wakes the filler only when `zeroed` is short of it, not after every
    group: a wake-up per group costs the writer a contended lock and, on a small machine, a
    core at the moment the loop and the writer need both."""
    cdef int64_t step = s.prealloc if s.prealloc >= PAGE else ZERO_CHUNK
    return (s.claim + step + step - 1) // step * step


cdef inline int64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef int _pwrite_all(int fd, iovec *iov, int n, int64_t *at) noexcept nogil:
    """iov[0:n] written at *at (advanced), going on after short writes; 0 or errno."""
    cdef size_t want = 0, skip
    cdef ssize_t written
    cdef int k
    for k in range(n):
        want += iov[k].iov_len
    while want:
        written = pwritev(fd, iov, n, at[0])
        if written < 0:
            if errno == EINTR:
                continue
            return errno
        if written == 0:
            return EIO
        at[0] += written
        want -= <size_t>written
        skip = <size_t>written
        while skip and n:
            if skip >= iov[0].iov_len:
                skip -= iov[0].iov_len
                memmove(iov, iov + 1, (n - 1) * sizeof(iovec))
                n -= 1
            else:
                iov[0].iov_base = <char *>iov[0].iov_base + skip
                iov[0].iov_len -= skip
                skip = 0
    return 0


cdef void _send_socket_runs(ReplyState *r, Reply **runs, Py_ssize_t count) noexcept nogil:
    """A synced group's runs for one socket, in order, in one sendmsg (IOV_PIECE runs at a
    time): as much as the socket takes at once, unless the loop has bytes of its own waiting
    or a run before them is half sent. One send per connection and group, so a client gets a
    group's acknowledgements together, as the loop's one write per group gave them."""
    cdef iovec iov[IOV_PIECE]
    cdef msghdr message
    cdef Py_ssize_t first = 0, k, i
    cdef ssize_t n
    cdef size_t left
    for i in range(count):
        runs[i].sent[0] = 0
    pthread_mutex_lock(&r.lock)
    while first < count and r.fd >= 0 and not r.loop_busy and not r.held and not r.owed:
        k = count - first if count - first < IOV_PIECE else IOV_PIECE
        for i in range(k):
            iov[i].iov_base = <void *>runs[first + i].data
            iov[i].iov_len = runs[first + i].size
        memset(&message, 0, sizeof(message))
        message.msg_iov, message.msg_iovlen = iov, k
        while True:
            n = sendmsg(r.fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL)
            if n >= 0 or errno != EINTR:
                break
        if n <= 0:  # full (EAGAIN) or broken: the loop sends them, or sees the error
            break
        left = <size_t>n
        for i in range(first, first + k):
            if left >= runs[i].size:
                runs[i].sent[0] = runs[i].size
                left -= runs[i].size
            else:
                if left:
                    runs[i].sent[0] = left
                    r.held = 1
                first = count  # the socket is full: the loop sends what is left
                break
        else:
            first += k
    for i in range(count):
        if runs[i].sent[0] < <Py_ssize_t>runs[i].size:
            r.owed += 1
    pthread_mutex_unlock(&r.lock)


cdef void _send_runs(Batch *group) noexcept nogil:
    """Every run of a synced group, gathered per socket."""
    cdef Py_ssize_t total = 0, taken = 0, count, i, j
    cdef Batch *b = group
    cdef Reply **runs
    cdef Reply **mine
    cdef ReplyState *r
    while b != NULL:
        total += b.reply_count
        b = b.next
    if not total:
        return
    runs = <Reply **>malloc(2 * total * sizeof(Reply *))
    if runs == NULL:  # nothing sent: the loop owes every run
        b = group
        while b != NULL:
            for i in range(b.reply_count):
                r = b.replies[i].socket
                pthread_mutex_lock(&r.lock)
                r.owed += 1
                pthread_mutex_unlock(&r.lock)
            b = b.next
        return
    mine = runs + total
    b = group
    while b != NULL:
        for i in range(b.reply_count):
            runs[taken] = &b.replies[i]
            taken += 1
        b = b.next
    for i in range(total):
        if runs[i] == NULL:
            continue
        r, count = runs[i].socket, 0
        for j in range(i, total):
            if runs[j] != NULL and runs[j].socket == r:
                mine[count] = runs[j]
                runs[j] = NULL
                count += 1
        _send_socket_runs(r, mine, count)
    free(runs)


cdef void _free_batch(Batch *b) noexcept nogil:
    free(b.iov)
    free(b.replies)
    free(b)


cdef int _write_group(WriterState *s, Batch *group, size_t size, size_t pad,
                      int64_t allocated) noexcept nogil:
    """The group's records at the journal's offset, then `pad` zeros (to a page boundary, so
    the page cache never reads a partly written page back from the disk), IOV_PIECE parts
    per pwritev; the file is extended by the preallocation step first when the records would
    pass `allocated` (its end, as the zero filler left it). 0 or errno."""
    cdef int64_t end = s.offset + <int64_t>size, step, at = s.offset
    cdef Batch *b = group
    cdef iovec iov[IOV_PIECE]
    cdef int n = 0, rc
    cdef Py_ssize_t i
    if end > allocated:
        step = s.prealloc if s.prealloc > <int64_t>size else <int64_t>size
        rc = posix_fallocate(s.fd, allocated, step)
        if rc:
            return rc
        pthread_mutex_lock(&s.lock)
        if s.allocated < allocated + step:
            s.allocated = allocated + step
        pthread_mutex_unlock(&s.lock)
    while b != NULL:
        for i in range(b.count):
            iov[n] = b.iov[i]
            n += 1
            if n == IOV_PIECE - 1:
                rc = _pwrite_all(s.fd, iov, n, &at)
                if rc:
                    return rc
                n = 0
        b = b.next
    if pad:
        iov[n].iov_base = _zero_page
        iov[n].iov_len = pad
        n += 1
    return _pwrite_all(s.fd, iov, n, &at) if n else 0


cdef void _roll(WriterState *s) noexcept nogil:
    """The next journal file, as `Journal._open_file` makes one (preallocated, synced, its
    directory synced); on failure the current file goes on."""
    cdef char path[PATH_MAX_LEN + 32]
    cdef int fd, dir_fd
    snprintf(path, sizeof(path), b"%s/%llx.txn", s.directory, <unsigned long long>(s.file_id + 1))
    fd = c_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    if fd < 0:
        return
    if (s.prealloc and posix_fallocate(fd, 0, s.prealloc)) or fsync(fd):
        c_close(fd)
        return
    dir_fd = c_open(s.directory, O_RDONLY | O_CLOEXEC)
    if dir_fd >= 0:
        fsync(dir_fd)
        c_close(dir_fd)
    c_close(s.fd)
    pthread_mutex_lock(&s.lock)
    s.fd, s.file_id, s.offset, s.allocated = fd, s.file_id + 1, 0, s.prealloc
    s.zeroed = s.claim = 0
    pthread_cond_signal(&s.fill_wake)
    pthread_mutex_unlock(&s.lock)


cdef int _open_for_zeros(WriterState *s, int64_t file_id) noexcept nogil:
    """The journal file `file_id` opened for the filler's writes: O_DIRECT where the file
    system takes it (the zeros then never sit dirty in the page cache, where the writer's
    fdatasync of the same file would wait for them); -1 if it cannot be opened."""
    cdef char path[PATH_MAX_LEN + 32]
    cdef int fd
    snprintf(path, sizeof(path), b"%s/%llx.txn", s.directory, <unsigned long long>file_id)
    fd = c_open(path, O_RDWR | O_CLOEXEC | O_DIRECT)
    if fd < 0:
        fd = c_open(path, O_RDWR | O_CLOEXEC)
    return fd


cdef void *_filler_run(void *arg) noexcept nogil:
    """Zeros written and synced ahead of the journal's writer, never on its path: a group
    written over space that already holds synced zeros needs only its data flushed by its
    fdatasync, where one over preallocated (unwritten) space also waits for the file
    system's own journal to record the conversion of those blocks."""
    cdef WriterState *s = <WriterState *>arg
    cdef int64_t target, start, length, file_id = -1
    cdef int fd = -1, rc
    cdef void *zeros = mmap(NULL, ZERO_CHUNK, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if zeros == MAP_FAILED:
        return NULL
    pthread_mutex_lock(&s.lock)
    while not s.closing:
        target = _fill_target(s)
        if s.zeroed < s.claim:
            s.zeroed = s.claim
        if s.zeroed >= target:
            pthread_cond_wait(&s.fill_wake, &s.lock)
            continue
        start = s.zeroed
        length = target - start if target - start < ZERO_CHUNK else ZERO_CHUNK
        s.filling, s.fill_at, s.fill_file = 1, start, s.file_id
        pthread_mutex_unlock(&s.lock)

        rc = 0
        if file_id != s.fill_file:
            if fd >= 0:
                c_close(fd)
            file_id = s.fill_file
            fd = _open_for_zeros(s, file_id)
        if fd < 0:
            rc = -1
        else:
            while c_pwrite(fd, zeros, length, start) != length:
                if errno == EINTR:
                    continue
                rc = -1
                break
            if not rc and fdatasync(fd):
                rc = -1

        pthread_mutex_lock(&s.lock)
        s.filling = 0
        pthread_cond_broadcast(&s.filled)
        if rc:  # no zeros ahead in this file: the writer goes on over preallocated space
            if s.file_id == file_id and not s.closing:
                pthread_cond_wait(&s.fill_wake, &s.lock)
            continue
        if s.file_id == file_id and s.zeroed == start:
            s.zeroed = start + length
            if s.allocated < s.zeroed:
                s.allocated = s.zeroed
    pthread_mutex_unlock(&s.lock)
    if fd >= 0:
        c_close(fd)
    munmap(zeros, ZERO_CHUNK)
    return NULL


cdef void *_writer_run(void *arg) noexcept nogil:
    cdef WriterState *s = <WriterState *>arg
    cdef Batch *group
    cdef Batch *last
    cdef Batch *b
    cdef size_t size, records
    cdef int64_t left, started
    cdef timespec until
    cdef Synced *done
    cdef int error
    cdef uint64_t one = 1
    cdef int64_t end, padded, allocated
    cdef size_t pad
    pthread_mutex_lock(&s.lock)
    while True:
        while s.head == NULL and not s.closing:
            pthread_cond_wait(&s.wake, &s.lock)
        if s.head == NULL:
            break
        if not s.flush_when_empty and s.wait_ns > 0:
            # the group fills, or its oldest record reaches the maximum wait
            while s.queued_bytes < s.threshold and not s.closing:
                left = s.oldest_ns + s.wait_ns - _now_ns()
                if left <= 0:
                    break
                until.tv_sec = <time_t>((s.oldest_ns + s.wait_ns) // 1000000000)
                until.tv_nsec = <long>((s.oldest_ns + s.wait_ns) % 1000000000)
                pthread_cond_timedwait(&s.wake, &s.lock, &until)
        group = s.head
        last = NULL
        size = records = 0
        while s.head != NULL and (size < s.threshold or last == NULL):
            last = s.head
            s.head = last.next
            size += last.size
            records += last.records
        last.next = NULL
        if s.head == NULL:
            s.tail = NULL
        else:
            s.oldest_ns = _now_ns()
        s.queued_bytes -= size
        s.queued_records -= records
        end = s.offset + <int64_t>size
        padded = (end + PAGE - 1) // PAGE * PAGE
        while s.filling and s.fill_file == s.file_id and s.fill_at < padded:
            pthread_cond_wait(&s.filled, &s.lock)
        if padded <= s.zeroed:
            pad = <size_t>(padded - end)
        else:
            pad = 0
            s.groups_past_zeroed += 1
        if s.claim < padded:
            s.claim = padded
            if s.zeroed < _fill_target(s) and not s.filling:
                pthread_cond_signal(&s.fill_wake)
        allocated = s.allocated
        pthread_mutex_unlock(&s.lock)

        done = <Synced *>malloc(sizeof(Synced))
        error = _write_group(s, group, size, pad, allocated)
        started = _now_ns()
        if not error and fdatasync(s.fd):
            error = errno
        if not error:  # durable: the responses leave now, before the loop hears of it
            _send_runs(group)
        if done != NULL:
            done.next = NULL
            done.token = last.token
            done.error = error
            done.sync_ns = _now_ns() - started
            done.size, done.records = size, records
        if not error:
            s.offset += <int64_t>size
        if done != NULL:
            done.file_id, done.end = s.file_id, s.offset
        if not error and s.offset >= s.max_size:
            _roll(s)
        while group != NULL:
            b = group.next
            _free_batch(group)
            group = b

        pthread_mutex_lock(&s.lock)
        if done != NULL:
            if s.synced_tail == NULL:
                s.synced_head = done
            else:
                s.synced_tail.next = done
            s.synced_tail = done
        c_write(s.event_fd, &one, 8)
    pthread_mutex_unlock(&s.lock)
    c_write(s.event_fd, &one, 8)
    return NULL


cdef class ReplySocket:
    """A connection's socket shared by the event loop and the journal's writer: the writer
    sends a synced group's runs of EOK responses itself (`ReplyRun`), so they leave without
    waiting for the loop to wake and run the group's callbacks; the loop writes everything
    else through its transport (`write`). The two never interleave inside a run (see
    `ReplyState`). The writer sends on a duplicate of the socket, closed by `close`, so it
    never writes to a descriptor number the loop has closed and reused."""

    cdef ReplyState *r

    def __cinit__(self, int fd):
        cdef pthread_mutexattr_t attr
        self.r = <ReplyState *>calloc(1, sizeof(ReplyState))
        if self.r == NULL:
            raise MemoryError()
        # Recursive for the loop: a transport may call its protocol back (`drained`) from
        # inside a write made under the lock.
        pthread_mutexattr_init(&attr)
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE)
        pthread_mutex_init(&self.r.lock, &attr)
        pthread_mutexattr_destroy(&attr)
        self.r.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        if self.r.fd < 0:
            raise OSError(errno, "cannot share the connection's socket")

    def __dealloc__(self):
        if self.r == NULL:
            return
        if self.r.fd >= 0:
            c_close(self.r.fd)
        pthread_mutex_destroy(&self.r.lock)
        free(self.r)
        self.r = NULL

    def close(self) -> None:
        """The writer sends nothing more (call before the transport closes its socket)."""
        cdef int fd
        pthread_mutex_lock(&self.r.lock)
        fd, self.r.fd = self.r.fd, -1
        pthread_mutex_unlock(&self.r.lock)
        if fd >= 0:
            c_close(fd)

    def write(self, transport, list frames not None) -> bool:
        """The loop's `frames` through `transport`, or False (nothing written) while a run
        of the writer's is half sent: the caller keeps them until `send_rest` of that run."""
        pthread_mutex_lock(&self.r.lock)
        try:
            if self.r.held:
                return False
            transport.writelines(frames)
            self.r.loop_busy = transport.get_write_buffer_size() > 0
            return True
        finally:
            pthread_mutex_unlock(&self.r.lock)

    def send_rest(self, transport, ReplyRun run not None) -> None:
        """A synced run's bytes the writer did not send, through `transport` (once for each
        such run, in the order of their groups). After it the loop writes again if the writer
        had sent part of the run, and the writer sends again once the loop owes nothing."""
        cdef Py_ssize_t sent = run._sent, size = PyBytes_GET_SIZE(run.data)
        pthread_mutex_lock(&self.r.lock)
        try:
            if sent < size:
                if not transport.is_closing():
                    transport.write(memoryview(run.data)[sent:] if sent else run.data)
                if self.r.owed > 0:
                    self.r.owed -= 1
            if sent:
                self.r.held = 0
            self.r.loop_busy = transport.get_write_buffer_size() > 0
        finally:
            pthread_mutex_unlock(&self.r.lock)

    def drained(self) -> None:
        """The transport has written everything it held (its protocol's `resume_writing`
        with a low-water mark of 0): the writer may send again."""
        pthread_mutex_lock(&self.r.lock)
        self.r.loop_busy = 0
        pthread_mutex_unlock(&self.r.lock)

    @property
    def owed(self) -> int:
        """Runs the writer left to the loop that the loop has not written yet."""
        pthread_mutex_lock(&self.r.lock)
        owed = self.r.owed
        pthread_mutex_unlock(&self.r.lock)
        return owed

    @property
    def held(self) -> bool:
        """A run of the writer's is half sent: the loop writes its rest before anything."""
        pthread_mutex_lock(&self.r.lock)
        held = self.r.held
        pthread_mutex_unlock(&self.r.lock)
        return bool(held)


cdef class ReplyRun:
    """Response frames (whole) for the journal's writer to send on `socket` once the batch
    submitted with them is durable; `sent` is how many bytes it sent (0 until then, and 0
    when it left them all to the loop: the socket was full, closed, or the loop's)."""

    cdef readonly ReplySocket socket
    cdef readonly bytes data
    cdef Py_ssize_t _sent

    def __cinit__(self, ReplySocket socket not None, bytes data not None):
        self.socket, self.data, self._sent = socket, data, 0

    @property
    def sent(self) -> int:
        return self._sent


cdef class GroupWriter:
    """The journal's writer thread (`storage.bookie.journal.Journal`), without the GIL: takes
    batches of records (`submit`), writes each group with pwritev at the file's offset and
    syncs it with fdatasync (grouped as the journal's settings say), rolls the file at its
    maximum size, and reports each group (`synced`) through `event_fd`.

    It owns the journal file from construction: `fd` and `file_id` are the current file (a
    roll closes the old one)."""

    cdef WriterState *s
    cdef pthread_t thread
    cdef pthread_t filler
    cdef bint started, joined, filler_started
    cdef uint64_t next_token

    def __cinit__(self, int fd, int64_t file_id, int64_t allocated, bytes directory not None,
                  double max_wait_ms, Py_ssize_t threshold, bint flush_when_empty,
                  int64_t max_size, int64_t prealloc):
        cdef pthread_condattr_t attr
        if PyBytes_GET_SIZE(directory) >= PATH_MAX_LEN:
            raise ValueError("journal directory path too long")
        self.s = <WriterState *>calloc(1, sizeof(WriterState))
        if self.s == NULL:
            raise MemoryError()
        memcpy(self.s.directory, PyBytes_AS_STRING(directory), PyBytes_GET_SIZE(directory))
        self.s.fd, self.s.file_id, self.s.allocated = fd, file_id, allocated
        self.s.wait_ns = <int64_t>(max_wait_ms * 1e6)
        self.s.threshold = threshold
        self.s.flush_when_empty = flush_when_empty
        self.s.max_size, self.s.prealloc = max_size, prealloc
        self.s.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        if self.s.event_fd < 0:
            raise OSError(errno, "eventfd failed")
        pthread_mutex_init(&self.s.lock, NULL)
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(&self.s.wake, &attr)
        pthread_condattr_destroy(&attr)
        pthread_cond_init(&self.s.fill_wake, NULL)
        pthread_cond_init(&self.s.filled, NULL)
        if pthread_create(&self.thread, NULL, _writer_run, self.s):
            raise OSError(EIO, "cannot start the journal writer thread")
        self.started = True
        if fd >= 0 and pthread_create(&self.filler, NULL, _filler_run, self.s) == 0:
            self.filler_started = True
        self.next_token = 1

    def __dealloc__(self):
        cdef Batch *b
        cdef Synced *d
        if self.s == NULL:
            return
        if self.started and not self.joined:
            self._stop()
        while self.s.head != NULL:
            b = self.s.head.next
            _free_batch(self.s.head)
            self.s.head = b
        while self.s.synced_head != NULL:
            d = self.s.synced_head.next
            free(self.s.synced_head)
            self.s.synced_head = d
        if self.s.event_fd >= 0:
            c_close(self.s.event_fd)
        pthread_mutex_destroy(&self.s.lock)
        pthread_cond_destroy(&self.s.wake)
        pthread_cond_destroy(&self.s.fill_wake)
        pthread_cond_destroy(&self.s.filled)
        free(self.s)
        self.s = NULL

    cdef void _stop(self) noexcept:
        pthread_mutex_lock(&self.s.lock)
        self.s.closing = 1
        pthread_cond_signal(&self.s.wake)
        pthread_cond_signal(&self.s.fill_wake)
        pthread_mutex_unlock(&self.s.lock)
        with nogil:
            pthread_join(self.thread, NULL)
            if self.filler_started:
                pthread_join(self.filler, NULL)
        self.joined = True

    @property
    def event_fd(self) -> int:
        return self.s.event_fd

    @property
    def fd(self) -> int:
        return self.s.fd

    @property
    def zeroed(self) -> int:
        """The offset in the current file up to which zeros are written and synced ahead of
        the writer (0 until the filler has written its first chunk of a file)."""
        pthread_mutex_lock(&self.s.lock)
        at = self.s.zeroed
        pthread_mutex_unlock(&self.s.lock)
        return at

    @property
    def groups_past_zeroed(self) -> int:
        """Groups written beyond the zeros the filler had synced (over preallocated space,
        whose conversion their fdatasync had to commit): the filler was behind."""
        pthread_mutex_lock(&self.s.lock)
        count = self.s.groups_past_zeroed
        pthread_mutex_unlock(&self.s.lock)
        return count

    def submit(self, list parts not None, Py_ssize_t records, list runs=None) -> int:
        """Queue `parts` (bytes, kept alive by the caller until `synced` reports the batch's
        token) holding `records` records, and `runs` (`ReplyRun`s, kept alive the same way)
        to send once the batch's group is synced; returns the batch's token (ascending)."""
        cdef Py_ssize_t n = len(parts), i, reply_count = len(runs) if runs else 0
        cdef size_t size = 0
        cdef Batch *b
        cdef object part
        cdef ReplyRun run
        if self.joined or self.s.closing:
            raise RuntimeError("journal writer is closed")
        for part in parts:
            if type(part) is not bytes:
                raise TypeError(f"a journal record part must be bytes, not {type(part).__name__}")
        for i in range(reply_count):
            if type(runs[i]) is not ReplyRun:
                raise TypeError(f"a run of responses must be a ReplyRun, not {type(runs[i]).__name__}")
        b = <Batch *>calloc(1, sizeof(Batch))
        if b == NULL:
            raise MemoryError()
        b.iov = <iovec *>malloc((n if n else 1) * sizeof(iovec))
        if reply_count:
            b.replies = <Reply *>malloc(reply_count * sizeof(Reply))
        if b.iov == NULL or (reply_count and b.replies == NULL):
            _free_batch(b)
            raise MemoryError()
        for i in range(reply_count):
            run = runs[i]
            run._sent = 0
            b.replies[i].socket = run.socket.r
            b.replies[i].data = PyBytes_AS_STRING(run.data)
            b.replies[i].size = PyBytes_GET_SIZE(run.data)
            b.replies[i].sent = &run._sent
        b.reply_count = reply_count
        for i in range(n):
            part = parts[i]
            b.iov[i].iov_base = PyBytes_AS_STRING(part)
            b.iov[i].iov_len = PyBytes_GET_SIZE(part)
            size += PyBytes_GET_SIZE(part)
        b.next = NULL
        b.count, b.size, b.records = n, size, records
        b.token = self.next_token
        self.next_token += 1
        pthread_mutex_lock(&self.s.lock)
        if self.s.tail == NULL:
            self.s.head = b
            self.s.oldest_ns = _now_ns()
        else:
            self.s.tail.next = b
        self.s.tail = b
        self.s.queued_bytes += size
        self.s.queued_records += records
        pthread_cond_signal(&self.s.wake)
        pthread_mutex_unlock(&self.s.lock)
        return b.token

    def synced(self) -> list:
        """The groups finished since the last call, oldest first: (last token, errno or 0,
        fdatasync seconds, bytes, records, file id, offset after it)."""
        cdef uint64_t count
        cdef Synced *d
        cdef Synced *next_d
        cdef list out = []
        c_read(self.s.event_fd, &count, 8)
        pthread_mutex_lock(&self.s.lock)
        d = self.s.synced_head
        self.s.synced_head = self.s.synced_tail = NULL
        pthread_mutex_unlock(&self.s.lock)
        while d != NULL:
            out.append((d.token, d.error, d.sync_ns / 1e9, d.size, d.records, d.file_id,
                        d.end))
            next_d = d.next
            free(d)
            d = next_d
        return out

    def close(self) -> None:
        """Write and sync what was submitted, then stop the thread (blocking)."""
        if self.started and not self.joined:
            self._stop()
