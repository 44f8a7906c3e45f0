// FUSE over io_uring (uring.c), for the device I/O (device.c).
#ifndef APPBOX_CFUSE_DEVICE_URING_H
#define APPBOX_CFUSE_DEVICE_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fuse_session;

/// Sets up the rings (one per worker thread) before INIT, on the session's /dev/fuse
/// descriptor. Returns false, with the reason recorded, when io_uring is unusable here.
bool cfuse_uring_prepare(struct fuse_session *se, int device);

/// Whether the rings are set up and waiting for INIT.
bool cfuse_uring_prepared(void);

/// At INIT: allocates each ring's buffers for requests of up to `max_payload` bytes.
/// Returns false (rings given up, reason recorded) when it cannot.
bool cfuse_uring_allocate(size_t max_payload);

/// At INIT, when the kernel did not offer FUSE over io_uring: gives the rings up, with
/// the reason.
void cfuse_uring_decline(const char *reason);

/// After the INIT reply that turned it on: starts the threads, which register their
/// buffers with the kernel; waits until each has registered or failed.
void cfuse_uring_start(void);

/// Whether the calling thread is serving a request taken from a ring.
bool cfuse_uring_serving(void);

/// The queue (CPU) of the ring request the calling thread serves, or -1; and how many
/// workers, each with one entry, a queue has.
int cfuse_uring_serving_queue(void);
unsigned cfuse_uring_workers_per_queue(void);

/// If this thread serves the ring request `unique`, answers it with `iov` (a fuse
/// out header, then the payload) and returns the bytes answered; else returns -1 and
/// touches nothing.
ssize_t cfuse_uring_answer(uint64_t unique, const struct iovec *iov, int count);

/// Where the answer of the ring request this thread serves may be built in place, when it
/// fits in `size` bytes (NULL: not serving one, or too small).
void *cfuse_uring_answer_space(size_t size);

/// Whether requests come through the rings (registered, and INIT answered).
bool cfuse_uring_active(void);

/// Waits up to `milliseconds` until the transport is decided: the kernel's INIT, which
/// comes just after the mount, answered and the rings registered (or given up).
void cfuse_uring_wait_settled(unsigned milliseconds);

/// Why io_uring is not in use (empty while it is, or before it was decided).
void cfuse_uring_reason(char *out, size_t size);

/// The rings' shape: queues, workers per queue, bytes of each worker's payload buffer.
void cfuse_uring_shape(unsigned *queues, unsigned *per_queue, size_t *payload);

/// Stops the threads (the mount is gone) and frees the rings.
void cfuse_uring_stop(void);

#endif
