// One reader at a time: which worker thread takes the next request from /dev/fuse.
//
// With every idle worker blocked in read(), the kernel hands each request to the worker
// that has waited longest (exclusive waiters queue in order): a program's requests go round
// the pool, each one waking a sleeping thread, often on the other CPU, while the thread that
// has just answered goes to the back of the queue. So only one worker (the reader) waits in
// read(); the others wait here. The reader serves a quick request itself and then reads
// again, so one program's stream of requests stays on one awake thread (a close's RELEASE
// is usually still being answered when the next open's GETATTR arrives).
//
// A request that may keep its worker for long first passes the reading to another worker,
// so that it runs beside the others: fsync, flush, fallocate, copy_file_range, truncate,
// reads and writes of more than 64 KiB; so does a handler that is about to wait or to work
// for long (cfuse_device_hand_off).
//
// Before it waits on an empty device, the reader runs the work it deferred (deferred.c);
// while requests come back to back, it polls for the next one before it sleeps
// (busy_poll.c).
//
// Over FUSE over io_uring, /dev/fuse carries only forgets and interrupts (every other
// request comes through a ring). The kernel wakes the sleeping reader for each forget it
// queues, one per file an unlink or `rm -rf` removes, and the reader sleeps again after it:
// two context switches and a read per file, on a thread that often has to run on the
// program's CPU. So after a forget the reader waits FORGET_GATHER_NS before it reads again:
// the forgets queued meanwhile come in that one read, as a BATCH_FORGET (the kernel packs
// whatever is queued into the read's buffer). A forget is then served up to that much
// later; a descriptor of a forgotten node stays open that much longer (a request out of
// descriptors waits for forgets anyway: SandboxFilesystem.withDescriptors), and so does an
// interrupt that comes meanwhile.
#define _GNU_SOURCE
#include "CFuseDevice.h"
#include "busy_poll.h"
#include "uring.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static struct {
  pthread_mutex_t lock;
  pthread_cond_t turn;  // signalled when the reading is free for a waiting worker
  bool reading;         // a worker is in (or on its way into) read()
  bool ended;           // the session is unmounted (ENODEV): no worker reads again
  bool after_forget;    // the last request read was a forget (only the reader uses it)
} readers = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, false};

/// How long the reader waits after a forget, over io_uring, before it reads again.
enum { FORGET_GATHER_NS = 1000 * 1000 };

// From the kernel's include/uapi/linux/fuse.h.
enum {
  IN_HEADER_SIZE = 40,  // struct fuse_in_header: len, opcode, unique, nodeid, uid, gid, pid, …
  OP_FORGET = 2,
  OP_SETATTR = 4,
  OP_READ = 15,
  OP_WRITE = 16,
  OP_FSYNC = 20,
  OP_FLUSH = 25,
  OP_FSYNCDIR = 30,
  OP_BATCH_FORGET = 42,
  OP_FALLOCATE = 43,
  OP_COPY_FILE_RANGE = 47,
  FATTR_SIZE = 1 << 3,        // fuse_setattr_in.valid, its first field
  READ_SIZE_OFFSET = 16,      // fuse_read_in: fh, offset, size
  WRITE_IN_SIZE = 40,         // fuse_write_in, then the data
  LARGE_IO = 64 * 1024,
};

static uint32_t field32(const void *request, size_t offset) {
  uint32_t value;
  memcpy(&value, (const char *)request + offset, sizeof value);
  return value;
}

/// Whether serving `request` may keep a worker for long.
static bool may_take_long(const void *request, ssize_t length) {
  if (length < IN_HEADER_SIZE) return true;
  size_t body = (size_t)length - IN_HEADER_SIZE;
  switch (field32(request, 4)) {
    case OP_FSYNC:
    case OP_FLUSH:
    case OP_FSYNCDIR:
    case OP_FALLOCATE:
    case OP_COPY_FILE_RANGE:
      return true;
    case OP_SETATTR:
      return body < 4 || (field32(request, IN_HEADER_SIZE) & FATTR_SIZE);
    case OP_READ:
      return body < READ_SIZE_OFFSET + 4 || field32(request, IN_HEADER_SIZE + READ_SIZE_OFFSET) > LARGE_IO;
    case OP_WRITE:
      return body > WRITE_IN_SIZE + LARGE_IO;
    default:
      return false;
  }
}

static void unlock(void *mutex) { pthread_mutex_unlock(mutex); }

ssize_t cfuse_device_take_request(int fd, void *buf, size_t len) {
  pthread_mutex_lock(&readers.lock);
  // A waiting worker may be cancelled: libfuse cancels its workers at exit.
  pthread_cleanup_push(unlock, &readers.lock);
  while (readers.reading && !readers.ended) pthread_cond_wait(&readers.turn, &readers.lock);
  pthread_cleanup_pop(0);
  if (readers.ended) {
    pthread_mutex_unlock(&readers.lock);
    errno = ENODEV;
    return -1;
  }
  readers.reading = true;
  pthread_mutex_unlock(&readers.lock);

  if (readers.after_forget && cfuse_uring_active()) {
    struct timespec gather = {.tv_sec = 0, .tv_nsec = FORGET_GATHER_NS};
    while (nanosleep(&gather, &gather) != 0 && errno == EINTR) {
    }
  }
  bool queued = false;
  if (cfuse_device_has_deferred()) {
    queued = cfuse_device_request_queued(fd);
    if (!queued) cfuse_device_run_deferred();
  }
  ssize_t got = cfuse_device_read_request(fd, buf, len, queued);
  int error = errno;
  uint32_t opcode = got >= IN_HEADER_SIZE ? field32(buf, 4) : 0;
  readers.after_forget = opcode == OP_FORGET || opcode == OP_BATCH_FORGET;

  pthread_mutex_lock(&readers.lock);
  readers.reading = false;
  if (got < 0 && error == ENODEV) {  // unmounted: every waiting worker ends too
    readers.ended = true;
    pthread_cond_broadcast(&readers.turn);
  } else if (got < 0 || may_take_long(buf, got)) {
    pthread_cond_signal(&readers.turn);
  }
  pthread_mutex_unlock(&readers.lock);
  errno = error;
  return got;
}

void cfuse_device_hand_off(void) {
  pthread_mutex_lock(&readers.lock);
  if (!readers.reading) pthread_cond_signal(&readers.turn);
  pthread_mutex_unlock(&readers.lock);
}
