// CPU handoff: a ring worker sends its reply as a SCHED_IDLE thread, so that the program it
// wakes stays on its CPU.
//
// A ring worker runs on its queue's CPU, the CPU the program that sent the request runs
// on: the program sleeps, the worker runs in its place, and the reply wakes the program.
// The reply is a system call, so at that wake-up the worker still runs, and the scheduler,
// finding the program's CPU busy and another one idle, moves the program there
// (select_idle_sibling: first the CPU it ran on before, if idle). Its next request then
// goes to that CPU's queue, whose worker's reply moves it back: on a machine with an idle
// CPU, a program that makes one request after another migrates at nearly every one, and
// each migration wakes an idle CPU (in a virtual machine, an exit to the hypervisor:
// bench/README.md, "Untar and the scheduler", measures it).
//
// The scheduler counts a CPU that runs only SCHED_IDLE threads as idle, and a waking
// thread of any other policy preempts them at once. So a worker that hands off is
// SCHED_IDLE when it commits its reply: the program is woken on its own CPU and runs there
// at once. It stays SCHED_IDLE while it waits for and serves its next requests, as long as
// its queue hands off: a change of policy costs about 1.5 µs here, and a loop of unlinks
// ran 15% faster without a pair of them per reply (bench/README.md, "A worker that stays
// idle").
//
// Only while programs move. A program is not moved by every reply: a loop of creates and
// unlinks ran on one CPU for thousands of requests, then was moved at each one for a
// while, and while it is not moved a worker that hands off only risks waiting behind
// others (below). A program's move shows in its next request, which comes on another
// queue. So each queue counts, per WINDOW of its requests, those whose sender's previous
// request came on another queue; a window in which a quarter did turns the handoff on for
// that queue for HOLD_NS. The handoff stops the moves it is for, so while on it cannot see
// whether it is still needed: after HOLD_NS the queue's next window measures without it.
// A worker turns SCHED_OTHER again at its first reply after that (one that waits meanwhile
// serves its next request as it is).
//
// Two guards. A SCHED_IDLE thread gets almost no CPU while other threads of its
// scheduling group want it (here a wake-up waited 3.8 ms on average beside a busy loop on
// its CPU): a request it serves then waits with it. A request served as SCHED_IDLE that
// took longer than STALL_NS, with the worker preempted meanwhile, is a stall: every worker
// then commits as a normal thread for a while, longer after each stall that follows
// another (10 ms, then twice as long each time, up to 10 s): a machine busy with other
// work soon sees one stall in 10 s, a quiet one a pause of 10 ms now and then. (A busy
// machine seldom turns the handoff on at all: with no idle CPU the scheduler moves no
// program.) And leaving SCHED_IDLE needs the right to raise a thread's priority
// (CAP_SYS_NICE, or an RLIMIT_NICE of 20): a scratch thread tries the round trip at start,
// and without it there is no handoff.
#define _GNU_SOURCE
#include "handoff.h"

#include "CFuseDevice.h"
#include "monotonic.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/// Requests per measuring window of a queue...
static const uint32_t WINDOW = 256;
/// ...and how long a window in which a quarter of the senders moved turns its handoff on.
static const uint64_t HOLD_NS = 250 * 1000 * 1000;
/// Senders remembered (by thread id modulo this): the queue of each one's last request.
#define SENDER_SLOTS 1024

/// A request served as SCHED_IDLE, with the worker preempted, slower than this is a stall...
static const uint64_t STALL_NS = 1000 * 1000;
/// ...after which the workers commit as normal threads for a pause that starts at
/// FIRST_PAUSE_NS and doubles with each stall up to LONGEST_PAUSE_NS, and starts again
/// at a stall more than CALM_NS after the last pause ended.
static const uint64_t FIRST_PAUSE_NS = 10 * 1000 * 1000;
static const uint64_t LONGEST_PAUSE_NS = 10ull * 1000 * 1000 * 1000;
static const uint64_t CALM_NS = 10ull * 1000 * 1000 * 1000;

static _Atomic bool wanted = true;
static _Atomic bool usable = false;
static _Atomic uint64_t handoff_count, stall_count;
static char reason[128];  // written once, before the workers start

// The pause, shared by all workers: a stall says the machine is busy, whichever worker saw it.
// Workers may race on these; a pause a little off either way does no harm.
static _Atomic uint64_t paused_until;  // CLOCK_MONOTONIC ns: workers commit as normal threads until then
static _Atomic uint64_t next_pause_ns;

// Where each sender's last request came: (thread id << 16) | (queue + 1), 0 for none yet.
// Written by the workers of every queue; two threads whose ids share a slot only make
// each other's next request look unmoved.
static _Atomic uint64_t sender_queue[SENDER_SLOTS];

// A queue's window, touched only by its own workers (all on its CPU): one cache line each.
struct queue_window {
  _Atomic uint32_t seen, moved;
  _Atomic uint64_t on_until;  // CLOCK_MONOTONIC ns: the queue's workers hand off until then
} __attribute__((aligned(64)));
static struct queue_window *windows;  // one per queue, indexed by the queue's id

static void stalled(uint64_t now) {
  uint64_t pause = atomic_load(&next_pause_ns);
  if (pause == 0 || now > atomic_load(&paused_until) + CALM_NS) pause = FIRST_PAUSE_NS;
  atomic_store(&paused_until, now + pause);
  atomic_store(&next_pause_ns, pause * 2 < LONGEST_PAUSE_NS ? pause * 2 : LONGEST_PAUSE_NS);
  atomic_fetch_add_explicit(&stall_count, 1, memory_order_relaxed);
}

static int set_policy(int policy) {
  struct sched_param parameters = {.sched_priority = 0};
  return sched_setscheduler(0, policy, &parameters) == 0 ? 0 : errno;
}

void cfuse_device_set_cpu_handoff(bool on) { atomic_store(&wanted, on); }

static void *round_trip(void *result) {
  int error = set_policy(SCHED_IDLE);
  if (error == 0) error = set_policy(SCHED_OTHER);  // the thread ends either way
  *(int *)result = error;
  return NULL;
}

void cfuse_handoff_prepare(unsigned queues) {
  if (!atomic_load(&wanted)) {
    snprintf(reason, sizeof reason, "--no-cpu-handoff");
    return;
  }
  int error = 0;
  pthread_t thread;
  int created = pthread_create(&thread, NULL, round_trip, &error);
  if (created != 0) {
    error = created;
  } else {
    pthread_join(thread, NULL);
  }
  if (error != 0) {
    snprintf(reason, sizeof reason, "a thread may not leave SCHED_IDLE here: %s (needs CAP_SYS_NICE or RLIMIT_NICE 20)",
             strerror(error));
    return;
  }
  windows = aligned_alloc(64, queues * sizeof *windows);
  if (windows == NULL) {
    snprintf(reason, sizeof reason, "no memory for the queues' windows");
    return;
  }
  memset(windows, 0, queues * sizeof *windows);
  atomic_store(&usable, true);
}

// Each worker's own state: whether it is SCHED_IDLE now, when it began to serve its
// request as such (0: it did not, or that request's reply is committed), and its count of
// involuntary context switches when it last looked.
static __thread bool idle_now;
static __thread uint64_t serving_since;
static __thread long preemptions;

static long preemptions_now(void) {
  struct rusage usage;
  return getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nivcsw : 0;
}

void cfuse_handoff_request(unsigned queue, uint32_t sender) {
  serving_since = idle_now ? cfuse_monotonic_ns() : 0;
  if (!atomic_load_explicit(&usable, memory_order_relaxed) || sender == 0) return;
  uint64_t mine = (uint64_t)sender << 16 | (queue + 1);
  uint64_t last = atomic_exchange_explicit(&sender_queue[sender % SENDER_SLOTS], mine, memory_order_relaxed);
  struct queue_window *window = &windows[queue];
  if (last >> 16 == sender && last != mine) atomic_fetch_add_explicit(&window->moved, 1, memory_order_relaxed);
  if (atomic_fetch_add_explicit(&window->seen, 1, memory_order_relaxed) + 1 < WINDOW) return;
  uint32_t moved = atomic_exchange_explicit(&window->moved, 0, memory_order_relaxed);
  atomic_store_explicit(&window->seen, 0, memory_order_relaxed);
  if (moved * 4 >= WINDOW) atomic_store_explicit(&window->on_until, cfuse_monotonic_ns() + HOLD_NS, memory_order_relaxed);
}

void cfuse_handoff_commit(unsigned queue) {
  bool allowed = atomic_load_explicit(&usable, memory_order_relaxed);
  if (!allowed && !idle_now) return;
  uint64_t now = cfuse_monotonic_ns();
  bool hand_off = allowed && now < atomic_load_explicit(&windows[queue].on_until, memory_order_relaxed) &&
                  now >= atomic_load_explicit(&paused_until, memory_order_relaxed);
  uint64_t served = serving_since;
  serving_since = 0;
  if (served != 0 && now - served > STALL_NS) {
    // Slow: preempted (something else wanted the CPU), or only a slow request (a disk).
    long preempted = preemptions_now();
    if (preempted != preemptions) {
      stalled(now);
      hand_off = false;
    }
    preemptions = preempted;
  }
  if (hand_off && !idle_now) {
    if (set_policy(SCHED_IDLE) != 0) return;
    idle_now = true;
    preemptions = preemptions_now();
  } else if (!hand_off && idle_now) {
    int error = set_policy(SCHED_OTHER);
    if (error != 0) {
      // The probe could: a limit lowered since (prlimit). No worker hands off from now on,
      // and this one tries again at its next reply.
      if (atomic_exchange(&usable, false))
        fprintf(stderr, "appbox: a ring worker could not leave SCHED_IDLE (%s): no more CPU handoff\n", strerror(error));
      return;
    }
    idle_now = false;
  }
  if (idle_now) atomic_fetch_add_explicit(&handoff_count, 1, memory_order_relaxed);
}

struct cfuse_cpu_handoff_stats cfuse_device_cpu_handoff_stats(void) {
  struct cfuse_cpu_handoff_stats stats = {
      .usable = atomic_load(&usable),
      .handoffs = atomic_load_explicit(&handoff_count, memory_order_relaxed),
      .stalls = atomic_load_explicit(&stall_count, memory_order_relaxed),
  };
  snprintf(stats.reason, sizeof stats.reason, "%s", stats.usable ? "" : reason);
  return stats;
}
