// CPU handoff (handoff.c), for the ring workers (uring.c).
#ifndef APPBOX_CFUSE_DEVICE_HANDOFF_H
#define APPBOX_CFUSE_DEVICE_HANDOFF_H

#include <stdint.h>

/// Before the ring workers of `queues` queues start: decides whether they may hand off here.
void cfuse_handoff_prepare(unsigned queues);

/// The worker serves a request of thread `sender` that came on `queue`: counts whether the
/// sender moved since its last one, and times the service if the worker is SCHED_IDLE.
void cfuse_handoff_request(unsigned queue, uint32_t sender);

/// Before the worker of `queue` commits its reply (with the wait for its next request, in
/// one system call): makes it SCHED_IDLE while the queue hands off, SCHED_OTHER otherwise.
void cfuse_handoff_commit(unsigned queue);

#endif
