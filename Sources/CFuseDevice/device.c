// See include/CFuseDevice.h.
#define _GNU_SOURCE
#define FUSE_USE_VERSION 314
#include "CFuseDevice.h"
#include "counters.h"
#include "uring.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include "../CFuse/shim.h"  // cfuse_reply_fd_data: CFuse is a system-library module, its header is found here
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

// The parts of the kernel's protocol (include/uapi/linux/fuse.h) used here; libfuse 3.14
// does not install its copy, and its copy predates passthrough.
enum { FUSE_OPCODE_INIT = 26 };
#define FUSE_FLAG_HANDLE_KILLPRIV_V2 (1ULL << 28)
#define FUSE_FLAG_INIT_EXT (1ULL << 30)
#define FUSE_FLAG_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#define FUSE_FLAG_PASSTHROUGH (1ULL << 37)
#define FUSE_FLAG_OVER_IO_URING (1ULL << 41)
#define FUSE_FLAG_MAX_PAGES (1ULL << 22)
#define FUSE_MIN_READ_BUFFER 8192
#define FOPEN_FLAG_PASSTHROUGH (1u << 7)
// Backing stacked at most this deep under the mount (2: also over overlayfs, as in a
// container); nothing can then be stacked on the mount itself.
#define PASSTHROUGH_STACK_DEPTH 2

struct in_header { uint32_t len, opcode; uint64_t unique, nodeid; uint32_t uid, gid, pid; uint16_t extlen, padding; };
struct init_in { uint32_t major, minor, max_readahead, flags, flags2, unused[11]; };
struct out_header { uint32_t len; int32_t error; uint64_t unique; };
struct init_out {
  uint32_t major, minor, max_readahead, flags;
  uint16_t max_background, congestion_threshold;
  uint32_t max_write, time_gran;
  uint16_t max_pages, map_alignment;
  uint32_t flags2, max_stack_depth;
  uint16_t request_timeout, unused[11];
};
struct open_out { uint64_t fh; uint32_t open_flags; int32_t backing_id; };
struct backing_map { int32_t fd; uint32_t flags; uint64_t padding; };
#define FUSE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct backing_map)
#define FUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)
_Static_assert(sizeof(struct in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct init_out) == 64, "fuse_init_out");
_Static_assert(sizeof(struct open_out) == 16, "fuse_open_out");

static struct {
  unsigned wanted;
  bool uring_refused;  // io_uring was asked for and given up before install (the reason is uring.c's)
  int device;
  _Atomic bool init_pending;   // until the INIT reply has been written
  _Atomic uint64_t init_unique;  // the INIT request's id (0: not seen)
  _Atomic uint64_t offered;      // the kernel's INIT flags
  _Atomic unsigned negotiated;   // CFUSE_DEVICE_* the kernel accepted
  cfuse_device_init_hook init_hook;  // told once the INIT reply is written (or refused)
  void *init_context;
} device_state;

static ssize_t device_read(int fd, void *buf, size_t len, void *userdata) {
  (void)userdata;
  ssize_t got = cfuse_device_take_request(fd, buf, len);
  if (got >= (ssize_t)sizeof(struct in_header)) cfuse_device_count_request(((const struct in_header *)buf)->opcode);
  if (got >= (ssize_t)(sizeof(struct in_header) + offsetof(struct init_in, unused)) &&
      atomic_load_explicit(&device_state.init_pending, memory_order_acquire)) {
    const struct in_header *in = buf;
    if (in->opcode == FUSE_OPCODE_INIT) {
      const struct init_in *init = (const void *)(in + 1);
      uint64_t flags = init->flags;
      if (flags & FUSE_FLAG_INIT_EXT) flags |= (uint64_t)init->flags2 << 32;
      atomic_store(&device_state.offered, flags);
      atomic_store(&device_state.init_unique, in->unique);
    }
  }
  return got;
}

/// Why the kernel's INIT did not offer FUSE over io_uring.
static const char *uring_unoffered_reason(void) {
  FILE *file = fopen("/sys/module/fuse/parameters/enable_uring", "re");
  if (file == NULL) return "this kernel has no FUSE over io_uring (Linux 6.14 or later, CONFIG_FUSE_IO_URING)";
  int c = fgetc(file);
  fclose(file);
  if (c == 'N' || c == '0') {
    return "the kernel's switch is off: /sys/module/fuse/parameters/enable_uring is 0 (--enable-uring sets it, for "
           "the whole host)";
  }
  return "the kernel did not offer it at INIT";
}

/// Adds the wanted features the kernel offered to libfuse's INIT reply.
static void amend_init(struct init_out *out) {
  uint64_t offered = atomic_load(&device_state.offered);
  unsigned negotiated = 0;
  uint64_t add = 0;
  if ((device_state.wanted & CFUSE_DEVICE_KILLPRIV_V2) && (offered & FUSE_FLAG_HANDLE_KILLPRIV_V2)) {
    add |= FUSE_FLAG_HANDLE_KILLPRIV_V2;
    negotiated |= CFUSE_DEVICE_KILLPRIV_V2;
  }
  if ((device_state.wanted & CFUSE_DEVICE_DIRECT_IO_MMAP) && (offered & FUSE_FLAG_DIRECT_IO_ALLOW_MMAP) &&
      (offered & FUSE_FLAG_INIT_EXT)) {
    add |= FUSE_FLAG_DIRECT_IO_ALLOW_MMAP | FUSE_FLAG_INIT_EXT;
    negotiated |= CFUSE_DEVICE_DIRECT_IO_MMAP;
  }
  uint64_t flags = out->flags | ((uint64_t)out->flags2 << 32);
  if ((device_state.wanted & CFUSE_DEVICE_PASSTHROUGH) && (offered & FUSE_FLAG_PASSTHROUGH) &&
      (offered & FUSE_FLAG_INIT_EXT) && !(flags & (1ULL << 16) /* FUSE_WRITEBACK_CACHE */)) {
    add |= FUSE_FLAG_PASSTHROUGH | FUSE_FLAG_INIT_EXT;
    out->max_stack_depth = PASSTHROUGH_STACK_DEPTH;
    negotiated |= CFUSE_DEVICE_PASSTHROUGH;
  }
  if (cfuse_uring_prepared()) {
    if ((offered & FUSE_FLAG_OVER_IO_URING) && (offered & FUSE_FLAG_INIT_EXT)) {
      // The kernel's largest request: as its ring (fs/fuse/dev_uring.c) computes it.
      size_t payload = out->max_write > FUSE_MIN_READ_BUFFER ? out->max_write : FUSE_MIN_READ_BUFFER;
      if ((flags & FUSE_FLAG_MAX_PAGES) && (size_t)out->max_pages * 4096 > payload) payload = (size_t)out->max_pages * 4096;
      if (cfuse_uring_allocate(payload)) {
        add |= FUSE_FLAG_OVER_IO_URING | FUSE_FLAG_INIT_EXT;
        negotiated |= CFUSE_DEVICE_IO_URING;
      }
    } else {
      cfuse_uring_decline(uring_unoffered_reason());
    }
    if (!(negotiated & CFUSE_DEVICE_IO_URING)) {
      char reason[256];
      cfuse_uring_reason(reason, sizeof reason);
      fprintf(stderr, "appbox: FUSE over io_uring is not available (%s): requests go through /dev/fuse\n", reason);
    }
  }
  flags |= add;
  out->flags = (uint32_t)flags;
  out->flags2 = (uint32_t)(flags >> 32);
  atomic_store(&device_state.negotiated, negotiated);
}

/// The kernel applies the INIT reply while it is written. Registering a backing file
/// needs CAP_SYS_ADMIN, checked before the descriptor: a probe with no descriptor fails
/// with EBADF when the daemon may, EPERM when it may not (then passthrough is off).
static void probe_passthrough(void) {
  if (!(atomic_load(&device_state.negotiated) & CFUSE_DEVICE_PASSTHROUGH)) return;
  struct backing_map map = {.fd = -1};
  if (ioctl(device_state.device, FUSE_DEV_IOC_BACKING_OPEN, &map) < 0 && errno == EBADF) return;
  atomic_fetch_and(&device_state.negotiated, ~(unsigned)CFUSE_DEVICE_PASSTHROUGH);
}

/// After the INIT reply that turned FUSE over io_uring on: the rings register. Once they
/// are up, /dev/fuse carries only forgets and interrupts, which need no busy polling.
static void start_uring(void) {
  cfuse_uring_start();
  if (cfuse_uring_active()) {
    cfuse_device_set_busy_poll(0);
  } else {
    atomic_fetch_and(&device_state.negotiated, ~(unsigned)CFUSE_DEVICE_IO_URING);
  }
}

// The backing file the reply being written by this thread must carry (0: none). libfuse
// 3.14 writes open and create replies without passthrough; cfuse_reply_*_backing set this
// around its call, and device_writev adds FOPEN_PASSTHROUGH and the id to the fuse_open_out
// that ends the reply.
static _Thread_local int32_t reply_backing;

/// The largest reply ending in a fuse_open_out: create's (fuse_entry_out, then it).
#define OPEN_REPLY_MAX (128 + sizeof(struct open_out))

/// Sends a reply: into its ring entry when this thread serves a request from a ring (the
/// reply's unique is that request's), else to /dev/fuse (notifications, and replies to
/// what came through /dev/fuse: INIT, interrupts, everything before the rings are up).
static ssize_t send_reply(int fd, struct iovec *iov, int count) {
  if (cfuse_uring_serving() && count >= 1 && iov[0].iov_len == sizeof(struct out_header)) {
    const struct out_header *header = iov[0].iov_base;
    ssize_t answered = cfuse_uring_answer(header->unique, iov, count);
    if (answered >= 0) return answered;
  }
  return writev(fd, iov, count);
}

/// Writes an open or create reply with passthrough on `reply_backing`.
static ssize_t write_backing_reply(int fd, struct iovec *iov) {
  char amended[OPEN_REPLY_MAX];
  memcpy(amended, iov[1].iov_base, iov[1].iov_len);
  struct open_out out;
  char *last = amended + iov[1].iov_len - sizeof out;
  memcpy(&out, last, sizeof out);
  out.open_flags |= FOPEN_FLAG_PASSTHROUGH;
  out.backing_id = reply_backing;
  memcpy(last, &out, sizeof out);
  struct iovec replaced[2] = {iov[0], {.iov_base = amended, .iov_len = iov[1].iov_len}};
  return send_reply(fd, replaced, 2);
}

/// Writes the reply to INIT (libfuse's answer or its refusal), adding the wanted features
/// to an answer, then tells the INIT hook how it went: 0 once the kernel has taken the
/// answer, else the refusal's or the write's errno.
static ssize_t write_init_reply(int fd, struct iovec *iov, int count) {
  const struct out_header *header = iov[0].iov_base;
  atomic_store_explicit(&device_state.init_pending, false, memory_order_release);
  ssize_t written;
  if (header->error == 0 && count == 2 && iov[1].iov_len == sizeof(struct init_out)) {
    struct init_out amended;
    memcpy(&amended, iov[1].iov_base, sizeof amended);
    amend_init(&amended);
    struct iovec replaced[2] = {iov[0], {.iov_base = &amended, .iov_len = sizeof amended}};
    written = writev(fd, replaced, 2);
    int saved = errno;
    if (written > 0) {
      probe_passthrough();
      // Before the hook: a mount is ready once its transport is settled.
      if (atomic_load(&device_state.negotiated) & CFUSE_DEVICE_IO_URING) start_uring();
    } else if (atomic_load(&device_state.negotiated) & CFUSE_DEVICE_IO_URING) {
      cfuse_uring_decline("the INIT reply could not be written");
    }
    errno = saved;
  } else {
    if (cfuse_uring_prepared()) cfuse_uring_decline("INIT was refused");
    written = writev(fd, iov, count);
  }
  int saved = errno;
  int outcome = header->error != 0 ? -header->error : written < 0 ? saved : 0;
  if (device_state.init_hook != NULL) device_state.init_hook(device_state.init_context, outcome);
  errno = saved;
  return written;
}

static ssize_t write_reply(int fd, struct iovec *iov, int count) {
  if (reply_backing > 0 && count == 2 && iov[1].iov_len >= sizeof(struct open_out) &&
      iov[1].iov_len <= OPEN_REPLY_MAX) {
    return write_backing_reply(fd, iov);
  }
  if (atomic_load_explicit(&device_state.init_pending, memory_order_acquire) && count >= 1 &&
      iov[0].iov_len == sizeof(struct out_header)) {
    const struct out_header *header = iov[0].iov_base;
    // The kernel sends nothing else before it has the answer to INIT, so the first reply
    // is INIT's; its id, when the read was seen, must match too.
    uint64_t init = atomic_load(&device_state.init_unique);
    if (init == 0 || header->unique == init) return write_init_reply(fd, iov, count);
  }
  return send_reply(fd, iov, count);
}

// Every reply goes through one of these two; the worker then runs its deferred work.
static ssize_t device_writev(int fd, struct iovec *iov, int count, void *userdata) {
  (void)userdata;
  ssize_t written = write_reply(fd, iov, count);
  cfuse_device_run_deferred();
  return written;
}

/// Reads exactly `len` bytes from a pipe.
static bool read_pipe(int fd, void *buf, size_t len) {
  for (size_t done = 0; done < len;) {
    ssize_t got = read(fd, (char *)buf + done, len - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += (size_t)got;
  }
  return true;
}

/// A spliced reply (header and data in a pipe) to a ring request, read into its entry.
/// Splicing is not asked for while rings are planned (cfuse_device_uring_planned), so this
/// serves only a reply libfuse splices regardless.
static ssize_t splice_into_ring(int pipe, size_t len) {
  struct out_header header;
  if (len < sizeof header || !read_pipe(pipe, &header, sizeof header)) return -1;
  void *payload = cfuse_uring_answer_space(len - sizeof header);
  if (payload == NULL || !read_pipe(pipe, payload, len - sizeof header)) {
    errno = EIO;
    return -1;
  }
  struct iovec iov[2] = {{&header, sizeof header}, {payload, len - sizeof header}};
  return cfuse_uring_answer(header.unique, iov, 2);
}

static ssize_t device_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len, unsigned flags,
                                  void *userdata) {
  (void)userdata;
  ssize_t moved = cfuse_uring_serving() ? splice_into_ring(fdin, len) : splice(fdin, offin, fdout, offout, len, flags);
  cfuse_device_run_deferred();
  return moved;
}

static ssize_t device_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len, unsigned flags,
                                     void *userdata) {
  (void)userdata;
  return splice(fdin, offin, fdout, offout, len, flags);
}

int cfuse_device_install(struct fuse_session *se, unsigned wanted) {
  static const struct fuse_custom_io io = {
      .writev = device_writev,
      .read = device_read,
      .splice_receive = device_splice_receive,
      .splice_send = device_splice_send,
  };
  device_state.wanted = wanted;
  device_state.device = fuse_session_fd(se);
  atomic_store(&device_state.init_pending, true);
  if ((wanted & CFUSE_DEVICE_IO_URING) && !cfuse_uring_prepare(se, device_state.device)) {
    char reason[256];
    cfuse_uring_reason(reason, sizeof reason);
    fprintf(stderr, "appbox: FUSE over io_uring is not available (%s): requests go through /dev/fuse\n", reason);
  }
  return fuse_session_custom_io(se, &io, device_state.device);
}

void cfuse_device_on_init(cfuse_device_init_hook hook, void *context) {
  device_state.init_hook = hook;
  device_state.init_context = context;
}

void cfuse_device_uninstall(void) { cfuse_uring_stop(); }

void cfuse_device_refuse_uring(const char *reason) {
  device_state.uring_refused = true;
  cfuse_uring_decline(reason);
  fprintf(stderr, "appbox: FUSE over io_uring is not used (%s): requests go through /dev/fuse\n", reason);
}

unsigned cfuse_device_negotiated(void) { return atomic_load(&device_state.negotiated); }

int cfuse_device_ring_queue(void) { return cfuse_uring_serving_queue(); }

unsigned cfuse_device_ring_entries(void) { return cfuse_uring_workers_per_queue(); }

bool cfuse_device_uring_planned(void) {
  uint64_t offered = atomic_load(&device_state.offered);
  return cfuse_uring_prepared() && (offered & FUSE_FLAG_OVER_IO_URING) && (offered & FUSE_FLAG_INIT_EXT);
}

void cfuse_device_transport(struct cfuse_device_transport_info *info) {
  // Asked for io_uring, the answer comes with INIT, just after the mount: wait for it.
  if (device_state.wanted & CFUSE_DEVICE_IO_URING) cfuse_uring_wait_settled(5000);
  memset(info, 0, sizeof *info);
  info->requested = (device_state.wanted & CFUSE_DEVICE_IO_URING) != 0 || device_state.uring_refused;
  info->transport = cfuse_uring_active() ? CFUSE_TRANSPORT_IO_URING : CFUSE_TRANSPORT_DEV_FUSE;
  cfuse_uring_shape(&info->queues, &info->workers_per_queue, &info->payload);
  if (info->requested && info->transport != CFUSE_TRANSPORT_IO_URING) cfuse_uring_reason(info->reason, sizeof info->reason);
}

int32_t cfuse_device_backing_open(int fd) {
  struct backing_map map = {.fd = fd};
  int id = ioctl(device_state.device, FUSE_DEV_IOC_BACKING_OPEN, &map);
  if (id > 0) return id;
  int error = id < 0 ? errno : EIO;
  atomic_fetch_and(&device_state.negotiated, ~(unsigned)CFUSE_DEVICE_PASSTHROUGH);
  return -error;
}

void cfuse_device_backing_close(int32_t backing_id) {
  uint32_t id = (uint32_t)backing_id;
  (void)ioctl(device_state.device, FUSE_DEV_IOC_BACKING_CLOSE, &id);
}

int cfuse_reply_read(struct fuse_req *req, int fd, off_t offset, size_t size) {
  // Over io_uring: read straight into the ring entry's payload, which the reply then
  // leaves in place (cfuse_uring_answer copies nothing that is already there).
  void *space = cfuse_uring_answer_space(size);
  if (space == NULL) return cfuse_reply_fd_data(req, fd, offset, size);
  ssize_t got;
  do {
    got = pread(fd, space, size, offset);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return fuse_reply_err(req, errno);
  return fuse_reply_buf(req, space, (size_t)got);
}

int cfuse_reply_open_backing(struct fuse_req *req, const struct fuse_file_info *fi, int32_t backing_id) {
  reply_backing = backing_id;
  int sent = fuse_reply_open(req, fi);
  reply_backing = 0;
  return sent;
}

int cfuse_reply_create_backing(struct fuse_req *req, const struct fuse_entry_param *entry,
                               const struct fuse_file_info *fi, int32_t backing_id) {
  reply_backing = backing_id;
  int sent = fuse_reply_create(req, entry, fi);
  reply_backing = 0;
  return sent;
}
