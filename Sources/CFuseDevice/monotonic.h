// The monotonic clock in nanoseconds, for the timed waits of busy_poll.c and handoff.c.
#ifndef APPBOX_CFUSE_DEVICE_MONOTONIC_H
#define APPBOX_CFUSE_DEVICE_MONOTONIC_H

#include <stdint.h>
#include <time.h>

static inline uint64_t cfuse_monotonic_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

#endif
