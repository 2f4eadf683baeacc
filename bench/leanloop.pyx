# cython: boundscheck=False, wraparound=False, cdivision=True
"""The lean generator's closed loop, compiled and run without the GIL (bench/lean_load.py).

Every slot has one add in flight on its own ledger. A response is taken by its fixed 28-byte
V2 frame (length 24, header version 2 / ADD_ENTRY / no flags, result, ledger id, entry id): it
must be EOK, for a ledger of the run and the entry that slot has in flight; it records that
add's latency and sends the slot's next pre-built frame (all frames freed by one read go out in
one writev). The loop stops sending at `seconds` and returns once every slot is answered."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.errno cimport EINTR, errno
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memmove
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.uio cimport iovec, writev


cdef extern from "<sys/socket.h>" nogil:
    ssize_t recv(int fd, void *buf, size_t n, int flags)


DEF RESPONSE_LEN = 28
DEF ADD_RESPONSE_HEAD = (2 << 24) | (1 << 16)
DEF ENTRY_ID_AT = 36  # in an add frame: length, header, master key, ledger id, entry id
DEF RECV_CAPACITY = 1 << 20
DEF IOV_CHUNK = 1024

# Why a loop ended early (then `detail` holds the offending value).
DEF OK = 0
DEF CLOSED = 1
DEF IO_ERROR = 2
DEF NOT_ADD_RESPONSE = 3
DEF FAILED = 4
DEF UNKNOWN_LEDGER = 5
DEF WRONG_ENTRY = 6


cdef inline double now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline uint32_t be32(const unsigned char *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline uint64_t be64(const unsigned char *p) noexcept nogil:
    return (<uint64_t>be32(p) << 32) | be32(p + 4)


cdef int write_all(int fd, iovec *iov, int count) noexcept nogil:
    """Write every byte of `count` buffers (a blocking socket may take part of them)."""
    cdef ssize_t done
    cdef int batch
    while count > 0:
        batch = count if count < IOV_CHUNK else IOV_CHUNK
        done = writev(fd, iov, batch)
        if done < 0:
            if errno == EINTR:
                continue
            return -1
        while batch > 0 and done >= <ssize_t>iov[0].iov_len:
            done -= iov[0].iov_len
            iov += 1
            count -= 1
            batch -= 1
        if done > 0:
            iov[0].iov_base = <char *>iov[0].iov_base + done
            iov[0].iov_len -= done
    return 0


def run(int fd, list frames, double seconds, int64_t base):
    """Run the closed loop on connected blocking socket `fd`: slot i adds frames[i] in order to
    ledger base + i. Returns (adds acknowledged, elapsed s, latencies ms)."""
    cdef Py_ssize_t slots = len(frames)
    cdef Py_ssize_t total = 0
    cdef Py_ssize_t i, j
    for mine in frames:
        total += len(<list?>mine)
    if slots == 0:
        return 0, 0.0, []
    cdef char **data = <char **>malloc(total * sizeof(char *))
    cdef size_t *lengths = <size_t *>malloc(total * sizeof(size_t))
    cdef int64_t *entries = <int64_t *>malloc(total * sizeof(int64_t))
    cdef Py_ssize_t *first = <Py_ssize_t *>malloc((slots + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *next_index = <Py_ssize_t *>malloc(slots * sizeof(Py_ssize_t))
    cdef double *sent_at = <double *>malloc(slots * sizeof(double))
    cdef double *latencies = <double *>malloc(total * sizeof(double))
    cdef unsigned char *buf = <unsigned char *>malloc(RECV_CAPACITY)
    cdef iovec *out = <iovec *>malloc(slots * sizeof(iovec))
    cdef Py_ssize_t k = 0
    cdef bytes frame
    cdef int error = OK
    cdef int64_t detail = 0
    cdef Py_ssize_t adds = 0, in_flight = 0, have = 0, offset, sending_count, slot
    cdef ssize_t got
    cdef bint sending = True
    cdef double started = 0.0, stop, stamp, elapsed
    cdef uint32_t length, head
    cdef int32_t code
    cdef int64_t ledger_id, entry_id
    try:
        if (data == NULL or lengths == NULL or entries == NULL or first == NULL or next_index == NULL
                or sent_at == NULL or latencies == NULL or buf == NULL or out == NULL):
            raise MemoryError()
        for i in range(slots):
            first[i] = k
            for frame in <list>frames[i]:
                data[k] = PyBytes_AS_STRING(frame)
                lengths[k] = PyBytes_GET_SIZE(frame)
                if lengths[k] < ENTRY_ID_AT + 8:
                    raise ValueError(f"slot {i}: a frame of {lengths[k]} bytes is not an add")
                entries[k] = <int64_t>be64(<unsigned char *>data[k] + ENTRY_ID_AT)
                k += 1
            if k == first[i]:
                raise ValueError(f"slot {i} has no frames")
        first[slots] = k
        with nogil:
            started = now()
            stop = started + seconds
            for i in range(slots):
                sent_at[i] = started
                next_index[i] = first[i] + 1
                out[i].iov_base = data[first[i]]
                out[i].iov_len = lengths[first[i]]
            in_flight = slots
            if write_all(fd, out, <int>slots) < 0:
                error, detail = IO_ERROR, errno
            while in_flight and error == OK:
                got = recv(fd, buf + have, RECV_CAPACITY - have, 0)
                if got <= 0:
                    if got < 0 and errno == EINTR:
                        continue
                    error = CLOSED if got == 0 else IO_ERROR
                    detail = errno if got < 0 else 0
                    break
                have += got
                stamp = now()
                if stamp >= stop:
                    sending = False
                sending_count = 0
                offset = 0
                while have - offset >= RESPONSE_LEN:
                    length = be32(buf + offset)
                    head = be32(buf + offset + 4)
                    code = <int32_t>be32(buf + offset + 8)
                    ledger_id = <int64_t>be64(buf + offset + 12)
                    entry_id = <int64_t>be64(buf + offset + 20)
                    offset += RESPONSE_LEN
                    if length != RESPONSE_LEN - 4 or head != ADD_RESPONSE_HEAD:
                        error, detail = NOT_ADD_RESPONSE, (<int64_t>length << 32) | head
                        break
                    if code != 0:
                        error, detail = FAILED, code
                        break
                    slot = ledger_id - base
                    if slot < 0 or slot >= slots:
                        error, detail = UNKNOWN_LEDGER, ledger_id
                        break
                    if entry_id != entries[next_index[slot] - 1]:
                        error, detail = WRONG_ENTRY, entry_id
                        break
                    latencies[adds] = (stamp - sent_at[slot]) * 1e3
                    adds += 1
                    j = next_index[slot]
                    if sending and j < first[slot + 1]:
                        out[sending_count].iov_base = data[j]
                        out[sending_count].iov_len = lengths[j]
                        sending_count += 1
                        next_index[slot] = j + 1
                        sent_at[slot] = stamp
                    else:
                        in_flight -= 1
                if error != OK:
                    break
                if offset:
                    memmove(buf, buf + offset, have - offset)
                    have -= offset
                if sending_count and write_all(fd, out, <int>sending_count) < 0:
                    error, detail = IO_ERROR, errno
            elapsed = now() - started
        if error == CLOSED:
            raise ConnectionError("bookie closed the connection")
        if error == IO_ERROR:
            raise OSError(<int>detail, "socket error in the lean loop")
        if error == NOT_ADD_RESPONSE:
            raise RuntimeError(f"not an add response: length {detail >> 32}, "
                               f"header {detail & 0xFFFFFFFF:#x}")
        if error == FAILED:
            raise RuntimeError(f"add failed with code {detail}")
        if error == UNKNOWN_LEDGER:
            raise RuntimeError(f"response for ledger {detail}, not one of this run")
        if error == WRONG_ENTRY:
            raise RuntimeError(f"response for entry {detail}, not the one in flight")
        return adds, elapsed, [latencies[i] for i in range(adds)]
    finally:
        free(data)
        free(lengths)
        free(entries)
        free(first)
        free(next_index)
        free(sent_at)
        free(latencies)
        free(buf)
        free(out)
