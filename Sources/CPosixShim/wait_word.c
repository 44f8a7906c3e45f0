// A futex word that threads sleep on until it changes: the blocking half of
// Posix/Condition.swift (an "event count"). The word counts notifications; a waiter reads
// it, checks its condition, and sleeps only while the word still holds what it read, so a
// notification between the check and the sleep is never lost (the kernel compares the
// word and queues the waiter atomically). `waiters` lets a notification without waiters
// skip the system call: both counters use sequentially consistent operations, so either
// the notifier sees the waiter announced, or the waiter sees the new count.
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <time.h>

#include "CPosixShim.h"

uint32_t cposix_wait_word_load(cposix_wait_word *word) {
  return __atomic_load_n(&word->count, __ATOMIC_SEQ_CST);
}

int cposix_wait_word_wait(cposix_wait_word *word, uint32_t seen, int64_t timeout_ns) {
  struct timespec timeout, *relative = NULL;
  if (timeout_ns >= 0) {
    timeout.tv_sec = (time_t)(timeout_ns / 1000000000);
    timeout.tv_nsec = (long)(timeout_ns % 1000000000);
    relative = &timeout;
  }
  __atomic_add_fetch(&word->waiters, 1, __ATOMIC_SEQ_CST);
  int result = 0;
  if (__atomic_load_n(&word->count, __ATOMIC_SEQ_CST) == seen) {
    // EAGAIN: the word changed before the kernel queued us; EINTR: a signal. Both are
    // wake-ups the caller handles as any other (it checks its condition again).
    if (syscall(SYS_futex, &word->count, FUTEX_WAIT_PRIVATE, seen, relative, NULL, 0) != 0 && errno == ETIMEDOUT) {
      result = ETIMEDOUT;
    }
  }
  __atomic_sub_fetch(&word->waiters, 1, __ATOMIC_SEQ_CST);
  return result;
}

void cposix_wait_word_notify_all(cposix_wait_word *word) {
  __atomic_add_fetch(&word->count, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&word->waiters, __ATOMIC_SEQ_CST) != 0) {
    syscall(SYS_futex, &word->count, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
  }
}
