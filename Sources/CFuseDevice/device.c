// See include/CFuseDevice.h.
#define _GNU_SOURCE
#define FUSE_USE_VERSION 314
#include "CFuseDevice.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>
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

// The backing file the reply being written by this thread must carry (0: none). libfuse
// 3.14 writes open and create replies without passthrough; cfuse_reply_*_backing set this
// around its call, and device_writev adds FOPEN_PASSTHROUGH and the id to the fuse_open_out
// that ends the reply.
static _Thread_local int32_t reply_backing;

/// The largest reply ending in a fuse_open_out: create's (fuse_entry_out, then it).
#define OPEN_REPLY_MAX (128 + sizeof(struct open_out))

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
  return writev(fd, replaced, 2);
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
    if (written > 0) probe_passthrough();
  } else {
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
  return writev(fd, iov, count);
}

// Every reply goes through one of these two; the worker then runs its deferred work.
static ssize_t device_writev(int fd, struct iovec *iov, int count, void *userdata) {
  (void)userdata;
  ssize_t written = write_reply(fd, iov, count);
  cfuse_device_run_deferred();
  return written;
}

static ssize_t device_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len, unsigned flags,
                                  void *userdata) {
  (void)userdata;
  ssize_t moved = splice(fdin, offin, fdout, offout, len, flags);
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
  return fuse_session_custom_io(se, &io, device_state.device);
}

void cfuse_device_on_init(cfuse_device_init_hook hook, void *context) {
  device_state.init_hook = hook;
  device_state.init_context = context;
}

unsigned cfuse_device_negotiated(void) { return atomic_load(&device_state.negotiated); }

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
