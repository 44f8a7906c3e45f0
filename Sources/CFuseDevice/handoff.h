// CPU handoff (handoff.c), for the ring workers (uring.c).
#ifndef APPBOX_CFUSE_DEVICE_HANDOFF_H
#define APPBOX_CFUSE_DEVICE_HANDOFF_H

#include <liburing.h>
#include <stdint.h>

/// Before the ring workers of `queues` queues start: decides whether they may hand off here.
void cfuse_handoff_prepare(unsigned queues);

/// A request of thread `sender` came on `queue`: counts whether it moved since its last one.
void cfuse_handoff_note_sender(unsigned queue, uint32_t sender);

/// Submits the commit queued in `ring` as SCHED_IDLE when the worker of `queue` may hand
/// off now; else leaves it queued, for the worker's next submission.
void cfuse_handoff_commit(struct io_uring *ring, unsigned queue);

#endif
