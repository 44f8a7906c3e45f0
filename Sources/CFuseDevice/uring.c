// FUSE over io_uring (Linux 6.14+, include/uapi/linux/fuse.h 7.42): requests come on
// per-CPU queues instead of read(2) on /dev/fuse, and one io_uring command answers a
// request and fetches the next.
//
// The kernel's protocol (fs/fuse/dev_uring.c): after an INIT reply carrying
// FUSE_OVER_IO_URING, the daemon registers ring entries (FUSE_IO_URING_CMD_REGISTER: an
// io_uring command on /dev/fuse whose two iovecs are a header buffer, struct
// fuse_uring_req_header, and a payload buffer of at least the connection's largest
// request). The kernel holds every new request until each queue, one per possible CPU,
// has an entry; a failed registration makes it fall back to /dev/fuse instead. A request
// goes to the queue of the CPU its sender runs on and fills a free entry: the fuse_in_header
// in the header's in_out, the opcode's own argument struct in op_in, the rest (names, write
// data) in the payload, with the payload's size and a commit id in ring_ent_in_out; the
// command that registered or last committed the entry completes. The daemon answers in the
// same buffers (fuse_out_header in in_out, the reply's body in the payload) and sends
// FUSE_IO_URING_CMD_COMMIT_AND_FETCH with the commit id: the kernel ends the request and
// leaves the entry waiting for the next one. Forgets, interrupts and the daemon's
// notifications still pass through /dev/fuse (read and written by the session's workers).
//
// How AppBox uses it: each worker thread owns one io_uring and one entry, and is pinned to
// its queue's CPU (the request's task work and the wake-up stay on the CPU of the program
// that sent it, which is waiting anyway). A worker serves its request itself, through
// libfuse's fuse_session_process_buf, and the reply, which libfuse writes through the
// device I/O, is put into the entry (cfuse_uring_answer) and committed with the wait for
// the next request: one system call per request. Several workers per queue: a worker busy
// with a long request (an fsync, a purge, an inode invalidation whose dirty pages come back
// as WRITE requests on the same CPU) holds only its own entry, and the next request goes to
// another worker's. The kernel hands a queue's requests to the entry that became free last,
// so a program's stream of requests stays on one awake worker.
//
// Each ring has one user, its worker: it is made with IORING_SETUP_SINGLE_ISSUER and
// IORING_SETUP_DEFER_TASKRUN, so the kernel's completion of a fetch (run in the task that
// submitted it) is queued on the ring and run by the worker in its own wait, which it wakes,
// instead of as task work that signals the worker's thread. The ring is made disabled
// (IORING_SETUP_R_DISABLED) and enabled by its worker, which makes that thread the ring's one
// submitter. A kernel without these flags (before 6.1) gets plain rings.
//
// libfuse 3.14 handles requests as one contiguous buffer (header, argument struct, data):
// each payload buffer has room in front of it, where the header and the argument struct
// are copied before the request is handled, so write data is never copied.
#define _GNU_SOURCE
#include "uring.h"

#include "CFuseDevice.h"
#include "counters.h"
#include "handoff.h"

#define FUSE_USE_VERSION 314
#include <errno.h>
#include <fuse_lowlevel.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

// From the kernel's include/uapi/linux/fuse.h (7.42); libfuse 3.14's copy predates them.
enum { URING_CMD_REGISTER = 1, URING_CMD_COMMIT_AND_FETCH = 2 };
enum { IN_HEADER_SIZE = 40, OUT_HEADER_SIZE = 16, OP_IN_SIZE = 128 };
struct uring_ent_in_out { uint64_t flags, commit_id; uint32_t payload_sz, padding; uint64_t reserved; };
struct uring_req_header { char in_out[128]; char op_in[OP_IN_SIZE]; struct uring_ent_in_out ent; };
struct uring_cmd_req { uint64_t flags, commit_id; uint16_t qid; uint8_t padding[6]; };
struct in_header { uint32_t len, opcode; uint64_t unique, nodeid; uint32_t uid, gid, pid; uint16_t extlen, padding; };
struct out_header { uint32_t len; int32_t error; uint64_t unique; };
_Static_assert(sizeof(struct uring_req_header) == 288, "fuse_uring_req_header");
_Static_assert(sizeof(struct uring_cmd_req) <= 80, "fuse_uring_cmd_req fits an SQE128's command area");
_Static_assert(sizeof(struct in_header) == IN_HEADER_SIZE, "fuse_in_header");

/// Workers per queue (per possible CPU).
enum { WORKERS_PER_QUEUE = 4 };
/// Room in front of each payload for the fuse_in_header and the argument struct: a page,
/// so the payload (write data) is page-aligned.
enum { PREFIX = 4096 };

enum state { OFF, PREPARED, ALLOCATED, STARTING, ACTIVE, FAILED };

/// How each ring is made (see above), and without the flags a kernel may not know.
static const unsigned RING_FLAGS =
    IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED;
static const unsigned PLAIN_RING_FLAGS = IORING_SETUP_SQE128;
enum { REGISTER_ENABLE_RINGS = 12 };  // IORING_REGISTER_ENABLE_RINGS (Linux 5.10)

struct worker {
  unsigned qid;
  struct io_uring ring;
  bool ring_ready;
  bool ring_enabled;  // made disabled, and enabled since (by the thread that submits to it)
  struct uring_req_header *header;  // a page of its own
  char *buffer;                     // PREFIX bytes, then the payload
  struct iovec iov[2];
  uint32_t last_command;
  uint64_t commit_id;  // of the request being served
  uint64_t unique;     // the request being served (0: none)
  bool answered;
  pthread_t thread;
  bool started;
};

static struct {
  struct fuse_session *se;
  int device;
  unsigned queues;
  unsigned count;  // workers
  size_t payload;  // bytes per payload buffer
  struct worker *workers;
  _Atomic int state;
  pthread_mutex_t lock;  // guards reason, registered, failed, stopping
  pthread_cond_t changed;
  unsigned reported, failed;
  bool stopping;
  bool settled;  // the transport is decided (INIT answered, rings registered or not)
  char reason[256];
} uring = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

static _Thread_local struct worker *serving;

/// Records a state that settles the transport (OFF after a decline, ACTIVE, FAILED) and
/// wakes whoever waits for it (cfuse_uring_wait_settled).
static void settle(int state) {
  pthread_mutex_lock(&uring.lock);
  atomic_store(&uring.state, state);
  uring.settled = true;
  pthread_cond_broadcast(&uring.changed);
  pthread_mutex_unlock(&uring.lock);
}

void cfuse_uring_wait_settled(unsigned milliseconds) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += milliseconds / 1000;
  deadline.tv_nsec += (long)(milliseconds % 1000) * 1000000;
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&uring.lock);
  while (!uring.settled && atomic_load(&uring.state) != OFF) {
    if (pthread_cond_timedwait(&uring.changed, &uring.lock, &deadline) != 0) break;
  }
  pthread_mutex_unlock(&uring.lock);
}

static void set_reason(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void set_reason(const char *format, ...) {
  va_list args;
  va_start(args, format);
  pthread_mutex_lock(&uring.lock);
  vsnprintf(uring.reason, sizeof uring.reason, format, args);
  pthread_mutex_unlock(&uring.lock);
  va_end(args);
}

void cfuse_uring_reason(char *out, size_t size) {
  pthread_mutex_lock(&uring.lock);
  snprintf(out, size, "%s", uring.reason);
  pthread_mutex_unlock(&uring.lock);
}

bool cfuse_uring_active(void) { return atomic_load(&uring.state) == ACTIVE; }

void cfuse_uring_shape(unsigned *queues, unsigned *per_queue, size_t *payload) {
  *queues = uring.queues;
  *per_queue = uring.queues ? uring.count / uring.queues : 0;
  *payload = uring.payload;
}

/// The kernel's queues: one per possible CPU (num_possible_cpus), "0-N" in sysfs.
static unsigned possible_cpus(void) {
  FILE *file = fopen("/sys/devices/system/cpu/possible", "re");
  unsigned count = 0;
  if (file != NULL) {
    unsigned from, to;
    int c;
    while (fscanf(file, "%u", &from) == 1) {
      to = from;
      c = fgetc(file);
      if (c == '-') {
        if (fscanf(file, "%u", &to) != 1) break;
        c = fgetc(file);
      }
      count += to - from + 1;
      if (c != ',') break;
    }
    fclose(file);
  }
  if (count == 0) {
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    count = configured > 0 ? (unsigned)configured : 1;
  }
  return count;
}

static void free_rings(void) {
  for (unsigned i = 0; i < uring.count; i++) {
    struct worker *w = &uring.workers[i];
    if (w->ring_ready) io_uring_queue_exit(&w->ring);
    if (w->header != NULL) munmap(w->header, PREFIX);
    if (w->buffer != NULL) munmap(w->buffer, PREFIX + uring.payload);
  }
  free(uring.workers);
  uring.workers = NULL;
  uring.count = 0;
}

bool cfuse_uring_prepare(struct fuse_session *se, int device) {
  uring.se = se;
  uring.device = device;
  uring.queues = possible_cpus();
  uring.count = uring.queues * WORKERS_PER_QUEUE;
  uring.workers = calloc(uring.count, sizeof *uring.workers);
  if (uring.workers == NULL) {
    set_reason("no memory for %u rings", uring.count);
    uring.count = 0;
    return false;
  }
  for (unsigned i = 0; i < uring.count; i++) {
    struct worker *w = &uring.workers[i];
    w->qid = i / WORKERS_PER_QUEUE;
    struct io_uring_params params = {.flags = RING_FLAGS};
    int rc = io_uring_queue_init_params(2, &w->ring, &params);
    if (rc == -EINVAL) {
      params = (struct io_uring_params){.flags = PLAIN_RING_FLAGS};
      rc = io_uring_queue_init_params(2, &w->ring, &params);
    }
    if (rc < 0) {
      // EPERM: kernel.io_uring_disabled, or a seccomp filter; ENOSYS: no io_uring.
      set_reason("io_uring_setup failed: %s%s", strerror(-rc),
                 rc == -EPERM || rc == -ENOSYS ? " (kernel.io_uring_disabled, or a seccomp filter that blocks it)" : "");
      free_rings();
      return false;
    }
    w->ring_ready = true;
    rc = io_uring_register_files(&w->ring, &device, 1);
    if (rc < 0) {
      set_reason("io_uring_register_files failed: %s", strerror(-rc));
      free_rings();
      return false;
    }
  }
  atomic_store(&uring.state, PREPARED);
  return true;
}

bool cfuse_uring_prepared(void) { return atomic_load(&uring.state) == PREPARED; }

void cfuse_uring_decline(const char *reason) {
  set_reason("%s", reason);
  free_rings();
  settle(OFF);
}

bool cfuse_uring_allocate(size_t max_payload) {
  uring.payload = (max_payload + PREFIX - 1) / PREFIX * PREFIX;
  for (unsigned i = 0; i < uring.count; i++) {
    struct worker *w = &uring.workers[i];
    // Not populated: the pages are touched (and so resident) only as requests fill them.
    void *header = mmap(NULL, PREFIX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *buffer = mmap(NULL, PREFIX + uring.payload, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (header == MAP_FAILED || buffer == MAP_FAILED) {
      if (header != MAP_FAILED) munmap(header, PREFIX);
      if (buffer != MAP_FAILED) munmap(buffer, PREFIX + uring.payload);
      cfuse_uring_decline("no memory for the rings' buffers");
      return false;
    }
    w->header = header;
    w->buffer = buffer;
    w->iov[0] = (struct iovec){.iov_base = w->header, .iov_len = sizeof(struct uring_req_header)};
    w->iov[1] = (struct iovec){.iov_base = w->buffer + PREFIX, .iov_len = uring.payload};
  }
  atomic_store(&uring.state, ALLOCATED);
  return true;
}

/// Enables a ring made disabled, making the calling thread its one submitter (with
/// IORING_SETUP_SINGLE_ISSUER). Returns 0 or -errno.
static int enable_ring(struct worker *w) {
  if (!(w->ring.flags & IORING_SETUP_R_DISABLED) || w->ring_enabled) return 0;
  if (syscall(__NR_io_uring_register, w->ring.ring_fd, REGISTER_ENABLE_RINGS, NULL, 0) < 0) return -errno;
  w->ring_enabled = true;
  return 0;
}

/// Puts the worker's next command (register or commit-and-fetch) in its ring; it is sent
/// with the worker's next wait. `broken`: a registration the kernel must refuse.
static int queue_command(struct worker *w, uint32_t command, bool broken) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
  if (sqe == NULL) return -EBUSY;  // never: one command at a time, two slots
  memset(sqe, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->flags = IOSQE_FIXED_FILE;
  sqe->fd = 0;  // the registered /dev/fuse
  sqe->cmd_op = command;
  sqe->user_data = (uint64_t)(uintptr_t)w;
  if (command == URING_CMD_REGISTER) {
    sqe->addr = (uint64_t)(uintptr_t)w->iov;
    sqe->len = broken ? 0 : 2;
  }
  struct uring_cmd_req *req = (struct uring_cmd_req *)sqe->cmd;
  req->qid = (uint16_t)w->qid;
  req->commit_id = command == URING_CMD_COMMIT_AND_FETCH ? w->commit_id : 0;
  w->last_command = command;
  return 0;
}

static void report(bool failed) {
  pthread_mutex_lock(&uring.lock);
  uring.reported++;
  if (failed) uring.failed++;
  pthread_cond_broadcast(&uring.changed);
  pthread_mutex_unlock(&uring.lock);
}

/// Handles the request in the worker's entry through libfuse; the reply comes back to
/// cfuse_uring_answer on this thread.
static void serve(struct worker *w) {
  const struct in_header *in = (const void *)w->header->in_out;
  uint64_t commit_id = w->header->ent.commit_id;
  size_t payload = w->header->ent.payload_sz;
  cfuse_device_count_request(in->opcode);
  cfuse_handoff_request(w->qid, in->pid);
  w->commit_id = commit_id;
  w->unique = in->unique;
  w->answered = false;
  // The argument struct's size is what the header's length leaves beside the payload.
  size_t argument = in->len >= IN_HEADER_SIZE + payload ? in->len - IN_HEADER_SIZE - payload : SIZE_MAX;
  if (argument > OP_IN_SIZE || payload > uring.payload) {
    fprintf(stderr, "appbox: io_uring request %llu (opcode %u) has an impossible size: refused\n",
            (unsigned long long)in->unique, in->opcode);
  } else {
    char *start = w->buffer + PREFIX - IN_HEADER_SIZE - argument;
    memcpy(start, in, IN_HEADER_SIZE);
    memcpy(start + IN_HEADER_SIZE, w->header->op_in, argument);
    struct fuse_buf buf = {.mem = start, .size = in->len};
    serving = w;
    fuse_session_process_buf(uring.se, &buf);
    serving = NULL;
  }
  if (!w->answered) {
    // Every ring request is answered on its thread (forgets come through /dev/fuse); one
    // that was not would hang its sender forever.
    struct out_header out = {.len = OUT_HEADER_SIZE, .error = -EIO, .unique = w->unique};
    struct iovec iov = {.iov_base = &out, .iov_len = sizeof out};
    serving = w;
    cfuse_uring_answer(w->unique, &iov, 1);
    serving = NULL;
  }
  w->unique = 0;
}

static void *work(void *argument) {
  struct worker *w = argument;
  char name[16];
  snprintf(name, sizeof name, "appbox-ring-%u", w->qid);
  pthread_setname_np(pthread_self(), name);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(w->qid, &cpus);
  // Fails for a CPU the daemon may not use (taskset, a cpuset): the worker then runs
  // wherever the scheduler puts it, and its requests are woken across CPUs.
  (void)sched_setaffinity(0, sizeof cpus, &cpus);

  // A refused registration completes at once (the command is held while it waits).
  int rc = enable_ring(w);
  if (rc == 0) {
    queue_command(w, URING_CMD_REGISTER, false);
    rc = io_uring_submit(&w->ring);
  }
  struct io_uring_cqe *cqe = NULL;
  if (rc == 1 && io_uring_peek_cqe(&w->ring, &cqe) == 0 && cqe != NULL && cqe->res < 0) rc = cqe->res;
  if (rc != 1) {
    if (rc >= 0) rc = -EIO;
    set_reason("the kernel refused to register a ring entry: %s", strerror(-rc));
    report(true);
    return NULL;
  }
  report(false);

  for (;;) {
    // A reply is committed with the wait for the next request, in one system call; as a
    // SCHED_IDLE thread while the worker hands its CPU to the program it wakes (handoff.c).
    if (w->last_command == URING_CMD_COMMIT_AND_FETCH && io_uring_sq_ready(&w->ring) != 0) cfuse_handoff_commit(w->qid);
    rc = io_uring_submit_and_wait(&w->ring, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN) break;
    if (io_uring_peek_cqe(&w->ring, &cqe) != 0 || cqe == NULL) continue;
    int res = cqe->res;
    io_uring_cqe_seen(&w->ring, cqe);
    if (res == 0) {
      serve(w);
    } else if (res == -EAGAIN || res == -EINTR) {
      queue_command(w, w->last_command, false);
    } else {
      rc = res;
      break;
    }
  }
  // ENOTCONN: the connection ended (unmounted, or aborted). Anything else leaves this
  // worker's entry unserved: end the session rather than hang its requests.
  pthread_mutex_lock(&uring.lock);
  bool stopping = uring.stopping;
  pthread_mutex_unlock(&uring.lock);
  if (rc != -ENOTCONN && rc != -ECONNABORTED && !stopping) {
    fprintf(stderr, "appbox: io_uring worker of queue %u ended: %s; ending the session\n", w->qid, strerror(-rc));
    fuse_session_exit(uring.se);
  }
  return NULL;
}

void cfuse_uring_start(void) {
  atomic_store(&uring.state, STARTING);
  cfuse_handoff_prepare(uring.queues);
  unsigned started_in_queue[uring.queues];
  memset(started_in_queue, 0, sizeof started_in_queue);
  unsigned started = 0;
  for (unsigned i = 0; i < uring.count; i++) {
    struct worker *w = &uring.workers[i];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8 << 20);  // as libfuse's workers: the handlers are Swift
    w->started = pthread_create(&w->thread, &attr, work, w) == 0;
    pthread_attr_destroy(&attr);
    if (w->started) {
      started++;
      started_in_queue[w->qid]++;
    }
  }
  pthread_mutex_lock(&uring.lock);
  while (uring.reported < started) pthread_cond_wait(&uring.changed, &uring.lock);
  bool failed = uring.failed > 0;
  pthread_mutex_unlock(&uring.lock);
  for (unsigned q = 0; q < uring.queues && !failed; q++) {
    if (started_in_queue[q] > 0) continue;
    // A queue without a worker: the kernel would hold every request for it. A
    // registration it must refuse makes it fall back to /dev/fuse.
    struct worker *w = &uring.workers[q * WORKERS_PER_QUEUE];
    if (enable_ring(w) == 0) {  // this thread submits to the ring of a worker that never ran
      queue_command(w, URING_CMD_REGISTER, true);
      io_uring_submit(&w->ring);
    }
    set_reason("could not start a thread for queue %u", q);
    failed = true;
  }
  if (failed) {
    fprintf(stderr, "appbox: FUSE over io_uring failed (%s): requests go through /dev/fuse\n", uring.reason);
    settle(FAILED);
  } else {
    fprintf(stderr, "appbox: requests come through FUSE over io_uring: %u queues, %u workers each\n", uring.queues,
            (unsigned)WORKERS_PER_QUEUE);
    settle(ACTIVE);
  }
}

bool cfuse_uring_serving(void) { return serving != NULL; }

int cfuse_uring_serving_queue(void) { return serving != NULL ? (int)serving->qid : -1; }

unsigned cfuse_uring_workers_per_queue(void) { return WORKERS_PER_QUEUE; }

ssize_t cfuse_uring_answer(uint64_t unique, const struct iovec *iov, int count) {
  struct worker *w = serving;
  if (w == NULL || w->answered || unique != w->unique || count < 1 || iov[0].iov_len != OUT_HEADER_SIZE) return -1;
  struct out_header out;
  memcpy(&out, iov[0].iov_base, sizeof out);
  char *payload = w->buffer + PREFIX;
  size_t length = 0;
  for (int i = 1; i < count; i++) {
    if (iov[i].iov_len > uring.payload - length) {
      fprintf(stderr, "appbox: a reply of more than %zu bytes does not fit its ring entry\n", uring.payload);
      out.error = -EIO;
      length = 0;
      break;
    }
    if (iov[i].iov_base != payload + length) memcpy(payload + length, iov[i].iov_base, iov[i].iov_len);
    length += iov[i].iov_len;
  }
  if (out.error != 0) length = 0;
  out.len = (uint32_t)(OUT_HEADER_SIZE + length);
  memcpy(w->header->in_out, &out, sizeof out);
  w->header->ent.payload_sz = (uint32_t)length;
  w->answered = true;
  if (queue_command(w, URING_CMD_COMMIT_AND_FETCH, false) < 0) return -1;
  return (ssize_t)(OUT_HEADER_SIZE + length);
}

void *cfuse_uring_answer_space(size_t size) {
  struct worker *w = serving;
  if (w == NULL || w->answered || size > uring.payload) return NULL;
  return w->buffer + PREFIX;
}

void cfuse_uring_stop(void) {
  int state = atomic_load(&uring.state);
  if (state == OFF) return;
  pthread_mutex_lock(&uring.lock);
  uring.stopping = true;
  pthread_mutex_unlock(&uring.lock);
  // After the unmount every worker's command has completed with ENOTCONN; a worker still
  // waiting (the session was ended while mounted) is left to the process's exit.
  bool all_ended = true;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 1;
  for (unsigned i = 0; i < uring.count; i++) {
    struct worker *w = &uring.workers[i];
    if (!w->started) continue;
    if (pthread_timedjoin_np(w->thread, NULL, &deadline) != 0) {
      all_ended = false;
      continue;
    }
    w->started = false;
  }
  if (all_ended) free_rings();
  atomic_store(&uring.state, OFF);
}
