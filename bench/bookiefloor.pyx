# cython: boundscheck=False, wraparound=False, cdivision=True
"""The bookie floor: the least a durable bookie does per add, compiled, on one thread, without
the GIL (bench/bookie_floor.py).

One connection, served until the client closes it. Each turn takes every byte the socket holds
(one blocking recv, then non-blocking ones until none is left) and, for each whole V2 add frame
in it: checks that it is a plain add, checks its CRC32C digest, appends its journal record (the
bookie's: length, CRC32C, the packaged entry) and its 28-byte EOK response. Then the turn's
records go to the journal file in one pwrite, padded with zeros to a 4 KiB boundary, one
fdatasync follows, and only then the responses go out in one send: an ack means what it means
for the bookie. The journal file is written with zeros beforehand (its blocks allocated, as the
bookie's filler prepares its journal) and written round from its start when full.

What it leaves out is everything else a bookie is: no write cache, entry log, index or
checkpoint, no fencing or master-key check, no statistics, no other request, one connection, and
by default no thread hand-off. Its rate is a bound on what any bookie design reaches on the
machine with the same client, network path and disk. With `handoff`, each turn's write and sync
run on a second thread as the bookie's journal writer runs them (a condition variable to hand a
turn over, an eventfd to report it synced): what those two hand-offs cost, alone."""

from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memmove, memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.types cimport off_t


cdef extern from "addpath_crc.h":
    void addpath_crc_init()
    uint32_t addpath_crc(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t addpath_be32(const unsigned char *p) nogil
    void addpath_put_be32(unsigned char *p, uint32_t v) nogil

cdef extern from "<sys/socket.h>" nogil:
    ssize_t recv(int fd, void *buf, size_t n, int flags)
    ssize_t send(int fd, const void *buf, size_t n, int flags)
    int accept(int fd, void *addr, void *addrlen)
    int MSG_DONTWAIT
    int MSG_NOSIGNAL

cdef extern from "<unistd.h>" nogil:
    ssize_t pwrite(int fd, const void *buf, size_t n, off_t offset)
    ssize_t read(int fd, void *buf, size_t n)
    ssize_t write(int fd, const void *buf, size_t n)
    int fdatasync(int fd)
    int close(int fd)

cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int initval, int flags)

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_t:
        pass
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_create(pthread_t *thread, void *attr, void *(*start)(void *) noexcept nogil,
                       void *arg)
    int pthread_join(pthread_t thread, void **retval)
    int pthread_mutex_init(pthread_mutex_t *mutex, void *attr)
    int pthread_mutex_destroy(pthread_mutex_t *mutex)
    int pthread_mutex_lock(pthread_mutex_t *mutex)
    int pthread_mutex_unlock(pthread_mutex_t *mutex)
    int pthread_cond_init(pthread_cond_t *cond, void *attr)
    int pthread_cond_destroy(pthread_cond_t *cond)
    int pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex)
    int pthread_cond_signal(pthread_cond_t *cond)

addpath_crc_init()

DEF HEADER_LEN = 32          # packaged entry: ledger, entry, LAC, length (i64 each)
DEF ENTRY_OVERHEAD = 36      # ... then the CRC32C digest (u32), then the payload
DEF ADD_IDS_AT = 24          # add body: header u32, master key, then the packaged entry
DEF ADD_MIN_BODY = ADD_IDS_AT + ENTRY_OVERHEAD
DEF PLAIN_ADD_HEADER = 0x02010000  # version 2, ADD_ENTRY, flags 0
DEF RESPONSE_LEN = 28        # length (24), header, result, ledger id, entry id
DEF RECORD_HEADER_LEN = 8
DEF PAGE = 4096
DEF CAPACITY = 8 << 20       # received bytes held at once; a turn's records and responses fit

MIN_JOURNAL = CAPACITY + PAGE  # bytes: one turn's records, padded, fit

# Why the loop ended (then `detail` holds errno or the offending value).
DEF CLOSED = 0
DEF IO_ERROR = 1
DEF NOT_PLAIN_ADD = 2
DEF BAD_DIGEST = 3
DEF OVERSIZE = 4


cdef inline double now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef int send_all(int fd, const unsigned char *p, size_t n) noexcept nogil:
    cdef ssize_t done
    while n > 0:
        done = send(fd, p, n, MSG_NOSIGNAL)
        if done < 0:
            if errno == EINTR:
                continue
            return -1
        p += done
        n -= done
    return 0


cdef struct Writer:
    int journal
    int64_t size
    int64_t offset      # where the next turn's records go
    unsigned char *records
    size_t length       # the turn's records (bytes before the padding)
    bint pending        # a turn handed to the writer thread, not yet synced
    bint stop
    int error           # errno of the last turn's failed write or sync, else 0
    double synced       # seconds in fdatasync
    int done            # the eventfd the writer thread signals a synced turn on
    pthread_mutex_t lock
    pthread_cond_t wake


cdef int write_turn(Writer *w) noexcept nogil:
    """The turn's records, padded with zeros to the next page boundary of the file (as the
    bookie's journal writer pads its groups: no partly written last page for the page cache
    to read from the disk first), in one pwrite, then one fdatasync; 0 or the errno of the
    failure."""
    cdef size_t padded = (w.length + PAGE - 1) // PAGE * PAGE
    cdef double t
    if w.offset + <int64_t>padded + PAGE > w.size:
        w.offset = 0
    padded = <size_t>((w.offset + <int64_t>w.length + PAGE - 1) // PAGE * PAGE - w.offset)
    memset(w.records + w.length, 0, padded - w.length)
    if pwrite(w.journal, w.records, padded, w.offset) != <ssize_t>padded:
        return errno if errno else 5  # EIO
    t = now()
    if fdatasync(w.journal) != 0:
        return errno
    w.synced += now() - t
    w.offset += w.length  # the next turn overwrites the padding
    return 0


cdef void *writer_main(void *arg) noexcept nogil:
    """The writer thread of `serve(handoff=True)`: each handed turn written and synced, then
    reported on the eventfd (as the bookie's journal writer reports to its event loop)."""
    cdef Writer *w = <Writer *>arg
    cdef uint64_t one = 1
    cdef int error
    pthread_mutex_lock(&w.lock)
    while True:
        while not w.pending and not w.stop:
            pthread_cond_wait(&w.wake, &w.lock)
        if not w.pending:
            break
        pthread_mutex_unlock(&w.lock)
        error = write_turn(w)
        pthread_mutex_lock(&w.lock)
        w.error = error
        w.pending = False
        write(w.done, &one, 8)
    pthread_mutex_unlock(&w.lock)
    return NULL


def serve(int listener, int journal, int64_t journal_size, bint handoff=False):
    """Accept one connection on listening socket `listener` and serve its adds until it closes,
    journaling to file descriptor `journal` (`journal_size` bytes, written with zeros). With
    `handoff`, each turn's write and sync run on a second thread, handed over with a condition
    variable and reported back on an eventfd that this thread blocks on: the bookie's two
    hand-offs per journal group, and nothing else of it.

    Returns (adds acknowledged, synced groups, seconds in fdatasync, how it ended: "closed" or
    a reason)."""
    if journal_size < MIN_JOURNAL:
        raise ValueError(f"a journal of {journal_size} bytes is smaller than one turn can write")
    cdef unsigned char *buf = <unsigned char *>malloc(CAPACITY)
    cdef unsigned char *responses = <unsigned char *>malloc(CAPACITY)
    cdef Writer w
    memset(&w, 0, sizeof(Writer))
    w.journal = journal
    w.size = journal_size
    w.records = <unsigned char *>malloc(CAPACITY + PAGE)
    w.done = -1
    cdef pthread_t thread
    cdef bint threaded = False
    cdef int conn = -1, ending = CLOSED
    cdef int64_t detail = 0, adds = 0, groups = 0
    cdef size_t have = 0, pos, records_len, responses_len
    cdef ssize_t got
    cdef uint32_t size, digest
    cdef uint64_t reported
    cdef const unsigned char *entry
    if buf == NULL or w.records == NULL or responses == NULL:
        free(buf)
        free(w.records)
        free(responses)
        raise MemoryError()
    pthread_mutex_init(&w.lock, NULL)
    pthread_cond_init(&w.wake, NULL)
    try:
        if handoff:
            w.done = eventfd(0, 0)
            if w.done < 0 or pthread_create(&thread, NULL, writer_main, &w) != 0:
                raise OSError(errno, "cannot start the floor's writer thread")
            threaded = True
        with nogil:
            conn = accept(listener, NULL, NULL)
            if conn < 0:
                ending, detail = IO_ERROR, errno
            while conn >= 0:
                got = recv(conn, buf + have, CAPACITY - have, 0)
                if got < 0 and errno == EINTR:
                    continue
                if got <= 0:
                    if got < 0:
                        ending, detail = IO_ERROR, errno
                    break
                have += got
                while have < CAPACITY:  # everything else already there
                    got = recv(conn, buf + have, CAPACITY - have, MSG_DONTWAIT)
                    if got <= 0:
                        break
                    have += got
                pos = 0
                records_len = 0
                responses_len = 0
                while have - pos >= 4:
                    size = addpath_be32(buf + pos)
                    if size > CAPACITY - 4:
                        ending, detail = OVERSIZE, size
                        break
                    if size > have - pos - 4:
                        break
                    if size < ADD_MIN_BODY or addpath_be32(buf + pos + 4) != PLAIN_ADD_HEADER:
                        ending, detail = NOT_PLAIN_ADD, size
                        break
                    entry = buf + pos + 4 + ADD_IDS_AT
                    digest = addpath_crc(addpath_crc(0, entry, HEADER_LEN),
                                         entry + ENTRY_OVERHEAD, size - ADD_IDS_AT - ENTRY_OVERHEAD)
                    if digest != addpath_be32(entry + HEADER_LEN):
                        ending, detail = BAD_DIGEST, digest
                        break
                    addpath_put_be32(w.records + records_len, size - ADD_IDS_AT)
                    addpath_put_be32(w.records + records_len + 4,
                                     addpath_crc(0, entry, size - ADD_IDS_AT))
                    memcpy(w.records + records_len + RECORD_HEADER_LEN, entry, size - ADD_IDS_AT)
                    records_len += RECORD_HEADER_LEN + size - ADD_IDS_AT
                    addpath_put_be32(responses + responses_len, RESPONSE_LEN - 4)
                    addpath_put_be32(responses + responses_len + 4, PLAIN_ADD_HEADER)
                    addpath_put_be32(responses + responses_len + 8, 0)
                    memcpy(responses + responses_len + 12, entry, 16)
                    responses_len += RESPONSE_LEN
                    pos += 4 + size
                if ending != CLOSED:
                    break
                memmove(buf, buf + pos, have - pos)
                have -= pos
                if records_len == 0:
                    continue
                w.length = records_len
                if threaded:
                    pthread_mutex_lock(&w.lock)
                    w.pending = True
                    pthread_cond_signal(&w.wake)
                    pthread_mutex_unlock(&w.lock)
                    while read(w.done, &reported, 8) < 0 and errno == EINTR:
                        pass
                    pthread_mutex_lock(&w.lock)
                    detail = w.error
                    pthread_mutex_unlock(&w.lock)
                else:
                    detail = write_turn(&w)
                if detail != 0:
                    ending = IO_ERROR
                    break
                groups += 1
                adds += responses_len // RESPONSE_LEN
                if send_all(conn, responses, responses_len) < 0:
                    ending, detail = IO_ERROR, errno
                    break
            if conn >= 0:
                close(conn)
    finally:
        if threaded:
            with nogil:
                pthread_mutex_lock(&w.lock)
                w.stop = True
                pthread_cond_signal(&w.wake)
                pthread_mutex_unlock(&w.lock)
                pthread_join(thread, NULL)
        if w.done >= 0:
            close(w.done)
        pthread_cond_destroy(&w.wake)
        pthread_mutex_destroy(&w.lock)
        free(buf)
        free(w.records)
        free(responses)
    reasons = {CLOSED: "closed", IO_ERROR: f"I/O error (errno {detail})",
               NOT_PLAIN_ADD: f"not a plain add (frame of {detail} bytes)",
               BAD_DIGEST: "an entry's digest does not check",
               OVERSIZE: f"a frame of {detail} bytes"}
    return adds, groups, w.synced, reasons[ending]
