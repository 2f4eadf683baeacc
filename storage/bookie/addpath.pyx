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
journal record's checksum (`storage.bookie.format`: length u32, CRC32C u32, body).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_Append
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from storage.bookie.errors import CorruptEntry, MalformedFrame
from storage.runtime import hand_over_gil

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
DEF RELEASE_PIECE = 512

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


cdef class WriteCache:
    """One half of the bookie's write cache: entries by (ledger, entry), the last entry per
    ledger, and each ledger's entry ids in arrival order (for the checkpoint's sort, see
    `sorted_ids`); `size` is the bytes of its entries."""

    cdef public dict entries
    cdef public dict ids
    cdef public dict last
    cdef public Py_ssize_t size

    def __cinit__(self):
        self.entries = {}
        self.ids = {}
        self.last = {}
        self.size = 0

    cdef inline void _put(self, object ledger_id, object entry_id, int64_t entry_c,
                          bytes entry) except *:
        cdef tuple key = (ledger_id, entry_id)
        cdef PyObject *old = PyDict_GetItem(self.entries, key)
        cdef Py_ssize_t old_size = 0
        cdef PyObject *found
        if old is not NULL:  # (`entries` is public: what it holds is checked, not assumed)
            old_size = len(<object>old)
        self.entries[key] = entry
        if old is NULL:
            found = PyDict_GetItem(self.ids, ledger_id)
            if found is NULL:
                self.ids[ledger_id] = [entry_id]
            else:
                PyList_Append(<object>found, entry_id)
        self.size += PyBytes_GET_SIZE(entry) - old_size
        found = PyDict_GetItem(self.last, ledger_id)
        if found is NULL or entry_c > <int64_t>(<object>found):
            self.last[ledger_id] = entry_id

    def put(self, ledger_id: int, entry_id: int, bytes entry not None) -> None:
        self._put(ledger_id, entry_id, entry_id, entry)

    def drop(self, ledger_ids: set) -> None:
        for key in [key for key in self.entries if key[0] in ledger_ids]:
            self.size -= len(self.entries.pop(key))
        for ledger_id in ledger_ids:
            self.last.pop(ledger_id, None)
            self.ids.pop(ledger_id, None)

    def release(self) -> None:
        """Empty this half, one entry at a time, handing the GIL over every 512 (one `clear()`
        of 32 MiB of 1 KiB entries is one C call holding it ~4 ms)."""
        cdef Py_ssize_t count
        for table in (self.entries, self.ids):
            pop = table.popitem
            for count in range(1, len(table) + 1):
                pop()
                if not count % RELEASE_PIECE:
                    hand_over_gil()
        self.last.clear()
        self.size = 0

    def sorted_ids(self) -> list:
        """(ledger, its entry ids ascending), by ledger. One ledger at a time: each ledger's
        ids arrive almost in order, so each sort is short and linear, whereas one `sorted()`
        of all the (ledger, entry) keys is a single C call that held the GIL, and so stalled
        the event loop, for 10-20 ms per 30,000 entries."""
        ordered = []
        for ledger_id in sorted(self.ids):
            ids = self.ids[ledger_id]
            ids.sort()
            ordered.append((ledger_id, ids))
        return ordered


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
    cdef uint32_t head_crc, payload_crc, shift
    cdef PyObject *key
    cdef object ledger_id, entry_id
    cdef bytes value
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
            value = PyBytes_FromStringAndSize(<const char *>entry, entry_len)
            entry_id = entry_c
            cache._put(ledger_id, entry_id, entry_c, value)
            addpath_put_be32(record_at + records_len, <uint32_t>entry_len)
            addpath_put_be32(record_at + records_len + 4,
                             addpath_combine(head_crc, payload_crc, shift))
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


cdef inline void _put_be64(unsigned char *p, uint64_t v) noexcept:
    addpath_put_be32(p, <uint32_t>(v >> 32))
    addpath_put_be32(p + 4, <uint32_t>v)


def pack_keys(dict entries not None, ledger_id, list ids not None, Py_ssize_t first,
              Py_ssize_t stop, list bodies not None, list keys not None):
    """The checkpoint's packing of one ledger's entries ids[first:stop] (ascending): each entry
    (`entries[ledger_id, entry_id]`) appended to `bodies` and its index key (ledger and entry
    id, big-endian u64 each: `Index.key`) to `keys`. The ids are taken as a copy first: the
    loop allocates, so other threads may run and change `ids` meanwhile."""
    cdef bytes key
    cdef uint64_t ledger_c = <uint64_t>(<int64_t>ledger_id)
    cdef unsigned char *out
    if first < 0:
        raise ValueError(f"first index {first} below 0")
    cdef list chosen = ids[first:stop]
    for entry_id in chosen:
        bodies.append(entries[ledger_id, entry_id])
        key = PyBytes_FromStringAndSize(NULL, 16)
        out = <unsigned char *>PyBytes_AS_STRING(key)
        _put_be64(out, ledger_c)
        _put_be64(out + 8, <uint64_t>(<int64_t>entry_id))
        keys.append(key)


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
