// CPU handoff (handoff.c), for the ring workers (uring.c).
#ifndef APPBOX_CFUSE_DEVICE_HANDOFF_H
#define APPBOX_CFUSE_DEVICE_HANDOFF_H

#include <liburing.h>

/// Before the ring workers start: decides whether they may hand off here.
void cfuse_handoff_prepare(void);

/// Submits the commit queued in `ring` as SCHED_IDLE when the worker may hand off now;
/// else leaves it queued, for the worker's next submission.
void cfuse_handoff_commit(struct io_uring *ring);

#endif
