// Busy polling: how the reader waits for its next request.
//
// A program's requests come one after another: it sends the next a few microseconds after
// it has the reply to the last. A reader asleep in read() has to be woken for each one: the
// program's CPU interrupts the reader's, the reader is switched in, and in a virtual machine
// each side exits to the hypervisor on the way. So while requests come back to back, the
// reader first polls the device for a short window (cfuse_device_set_busy_poll) and reads
// without ever sleeping when a request arrives in that time. Between polls it yields its
// CPU: a program waiting to run on the same CPU runs at once.
//
// Polling follows the traffic. A wait that outlasts the window turns it off: the reader then
// sleeps in read() at once, at no cost, and polls again after a wait that was shorter than
// the window. A burst of requests thus costs two sleeps, and its end one window of polling.
#include "busy_poll.h"

#include "CFuseDevice.h"
#include "monotonic.h"

#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

static _Atomic uint32_t window_us = 0;  // 0: never poll
static _Atomic uint64_t polled_count, waited_count;
// Only the reader reads and writes this; the reading passes between workers under the
// readers' lock (reader.c), which orders it.
static bool last_wait_was_short = false;

void cfuse_device_set_busy_poll(uint32_t microseconds) { atomic_store(&window_us, microseconds); }

struct cfuse_busy_poll_stats cfuse_device_busy_poll_stats(void) {
  return (struct cfuse_busy_poll_stats){
      .microseconds = atomic_load(&window_us),
      .polled = atomic_load_explicit(&polled_count, memory_order_relaxed),
      .waited = atomic_load_explicit(&waited_count, memory_order_relaxed),
  };
}

bool cfuse_device_request_queued(int fd) {
  struct pollfd device = {.fd = fd, .events = POLLIN};
  return poll(&device, 1, 0) > 0;  // readable, or an error (unmounted) that read() will report
}

ssize_t cfuse_device_read_request(int fd, void *buf, size_t len, bool queued) {
  uint64_t window = (uint64_t)atomic_load_explicit(&window_us, memory_order_relaxed) * 1000;
  if (window == 0) {
    atomic_fetch_add_explicit(&waited_count, 1, memory_order_relaxed);
    return read(fd, buf, len);
  }
  uint64_t start = cfuse_monotonic_ns();
  if (last_wait_was_short) {
    do {
      if (queued || cfuse_device_request_queued(fd)) {
        atomic_fetch_add_explicit(&polled_count, 1, memory_order_relaxed);
        return read(fd, buf, len);
      }
      sched_yield();
    } while (cfuse_monotonic_ns() - start <= window);
  }
  ssize_t got = read(fd, buf, len);
  last_wait_was_short = cfuse_monotonic_ns() - start <= window;
  atomic_fetch_add_explicit(&waited_count, 1, memory_order_relaxed);
  return got;
}
