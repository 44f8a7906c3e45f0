// The session's traffic with /dev/fuse, and the kernel features libfuse 3.14 predates.
//
// libfuse 3.14 speaks FUSE protocol 7.38; Linux 6.9+ offers more. AppBox installs its own
// device I/O on the session (fuse_session_custom_io): requests and replies pass through
// unchanged (read, writev, splice), except the reply to INIT, to which it adds, when the
// kernel offered them:
//   - FUSE_HANDLE_KILLPRIV_V2: the daemon clears set-user-ID/set-group-ID on writes and
//     truncates; the kernel then stops asking for security.capability before every write;
//   - FUSE_PASSTHROUGH: an open file may be backed by a registered backing file, whose
//     reads and writes the kernel serves without the daemon.
//   - FUSE_DIRECT_IO_ALLOW_MMAP: a file open for direct I/O (O_DIRECT) may be mapped
//     shared, as on a local filesystem; the kernel keeps its page cache coherent with the
//     direct reads and writes.
// Requests are read by one worker thread at a time (reader.c), which may put work off until
// after its next reply (deferred.c) and polls for the next request before it sleeps
// (busy_poll.c). When asked, and the kernel agrees, requests come through FUSE over io_uring
// instead (uring.c), and /dev/fuse carries only forgets, interrupts and notifications.
// Every request taken is counted by opcode (counters.c).
// One session per process (the state is global). Every symbol starts with `cfuse_device_`
// or `cfuse_reply_`.
#ifndef APPBOX_CFUSE_DEVICE_H
#define APPBOX_CFUSE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fuse_session;
struct fuse_req;
struct fuse_file_info;
struct fuse_entry_param;

/// Features to add to the INIT reply (bit set for `cfuse_device_install`'s `wanted`).
enum {
  CFUSE_DEVICE_KILLPRIV_V2 = 1,
  CFUSE_DEVICE_PASSTHROUGH = 2,
  CFUSE_DEVICE_DIRECT_IO_MMAP = 4,
  CFUSE_DEVICE_IO_URING = 8,  // FUSE over io_uring (Linux 6.14+), /dev/fuse when refused
};

/// Installs the device I/O on a mounted session. Returns 0 or -errno.
int cfuse_device_install(struct fuse_session *se, unsigned wanted);

/// Told how INIT went, once, on the worker thread that wrote the reply: `error` is 0 once
/// the kernel has taken libfuse's answer (the mount is up), else the errno of libfuse's
/// refusal (then the session ends) or of the failed write.
typedef void (*cfuse_device_init_hook)(void *context, int error);

/// Sets the INIT hook; call before the session loop starts.
void cfuse_device_on_init(cfuse_device_init_hook hook, void *context);

/// Records that io_uring was asked for and is not used, and why (call instead of asking
/// for CFUSE_DEVICE_IO_URING in `cfuse_device_install`); logged, and shown by
/// cfuse_device_transport.
void cfuse_device_refuse_uring(const char *reason);

/// Stops what the device I/O started (the io_uring workers), after the session's loop.
void cfuse_device_uninstall(void);

/// The features the kernel accepted (0 until INIT has been answered).
unsigned cfuse_device_negotiated(void);

/// During INIT: whether requests will come through io_uring (asked for, rings set up, and
/// offered by the kernel). Replies are then never spliced: they go into the ring's buffers.
bool cfuse_device_uring_planned(void);

/// The io_uring queue (one per CPU) of the request the calling thread serves, which only
/// it can answer (before it returns from the handler); -1 when the request did not come
/// through a ring. A queue has `cfuse_device_ring_entries()` entries, one per worker.
int cfuse_device_ring_queue(void);
unsigned cfuse_device_ring_entries(void);

/// How requests reach the daemon.
enum { CFUSE_TRANSPORT_DEV_FUSE = 0, CFUSE_TRANSPORT_IO_URING = 1 };

/// The transport in use and, when io_uring was asked for and is not in use, why. When
/// io_uring was asked for, waits (up to 5 s) until INIT has decided.
struct cfuse_device_transport_info {
  int transport;               // CFUSE_TRANSPORT_*
  bool requested;              // io_uring was asked for
  unsigned queues;             // io_uring: the kernel's queues (one per possible CPU)
  unsigned workers_per_queue;  // io_uring: threads (each with one ring entry) per queue
  size_t payload;              // io_uring: bytes of each entry's payload buffer
  char reason[256];
};
void cfuse_device_transport(struct cfuse_device_transport_info *info);

/// Request counters: opcodes below this are counted each on its own, others as opcode 0.
#define CFUSE_DEVICE_OPCODES 53

/// Requests of `opcode` taken from the kernel so far (either transport).
uint64_t cfuse_device_request_count(uint32_t opcode);

/// The opcode's name in lower case without FUSE_ ("lookup", "batch_forget"; "other" for
/// 0), or NULL for a number the protocol leaves unused.
const char *cfuse_device_opcode_name(uint32_t opcode);

/// Registers an open backing file for passthrough. Returns its id (> 0) or -errno; after
/// a refusal passthrough is switched off for the session.
int32_t cfuse_device_backing_open(int fd);

/// Drops a backing file's registration.
void cfuse_device_backing_close(int32_t backing_id);

/// Reads the next request from `fd` into `buf` as read(2) does, once it is this thread's
/// turn to read (reader.c). The session's device I/O reads through it; tests call it on a
/// socket.
ssize_t cfuse_device_take_request(int fd, void *buf, size_t len);

/// Sets how long the reader polls for the next request before it sleeps, while requests
/// come back to back (busy_poll.c); 0, the initial value, turns polling off.
void cfuse_device_set_busy_poll(uint32_t microseconds);

/// Busy polling's setting, and the requests the reader has taken so far.
struct cfuse_busy_poll_stats {
  uint32_t microseconds;  // the window (0: off)
  uint64_t polled;        // requests found by polling
  uint64_t waited;        // requests waited for in read()
};
struct cfuse_busy_poll_stats cfuse_device_busy_poll_stats(void);

/// Whether ring workers may turn SCHED_IDLE to commit a reply, so that the program they
/// wake stays on its CPU (handoff.c); on, the initial value, unless turned off before the
/// mount. Used where the host allows it.
void cfuse_device_set_cpu_handoff(bool on);

/// CPU handoff's state and counts so far.
struct cfuse_cpu_handoff_stats {
  bool usable;        // ring workers hand off (io_uring in use, allowed, not turned off)
  uint64_t handoffs;  // replies committed as SCHED_IDLE
  uint64_t stalls;    // of these, ways back to SCHED_OTHER so slow that the worker paused handing off
  char reason[128];   // why not usable (empty when it is, or before the rings started)
};
struct cfuse_cpu_handoff_stats cfuse_device_cpu_handoff_stats(void);

/// Lets another worker read requests while this one waits or works for long. Call from a
/// request handler before such a wait (for a forget, which comes as a request) or work.
void cfuse_device_hand_off(void);

/// Work to run later on this worker (deferred.c).
typedef void (*cfuse_deferred_fn)(void *context, uint64_t first, uint64_t second);

/// Puts `work(context, first, second)` off until this worker has answered its next request,
/// or finds no request waiting (deferred.c). For work no request waits for: forgets.
void cfuse_device_defer(cfuse_deferred_fn work, void *context, uint64_t first, uint64_t second);

/// Whether this worker has deferred work.
bool cfuse_device_has_deferred(void);

/// Runs this worker's deferred work. The device I/O calls it after writing each reply;
/// the reader, before it waits on an empty device.
void cfuse_device_run_deferred(void);

/// Replies to a read with `size` bytes of `fd` at `offset`: over io_uring read straight
/// into the request's ring entry, else as CFuse's cfuse_reply_fd_data (copied or spliced).
int cfuse_reply_read(struct fuse_req *req, int fd, off_t offset, size_t size);

/// Replies to `open` as fuse_reply_open does, with the handle's I/O passed through to
/// `backing_id`.
int cfuse_reply_open_backing(struct fuse_req *req, const struct fuse_file_info *fi, int32_t backing_id);

/// Replies to `create` as fuse_reply_create does, with the handle's I/O passed through to
/// `backing_id`.
int cfuse_reply_create_backing(struct fuse_req *req, const struct fuse_entry_param *entry,
                               const struct fuse_file_info *fi, int32_t backing_id);

#endif
