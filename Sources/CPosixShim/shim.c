// Most of this target is header-only (include/CPosixShim.h); what needs a thread-local
// lives here.
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <sys/stat.h>

#include "CPosixShim.h"

int cposix_set_thread_umask(mode_t mask) {
  static __thread int owned;       // the thread has a filesystem context of its own
  static __thread mode_t current;  // its umask (0 when it took the context: the daemon's)
  if (!owned) {
    if (unshare(CLONE_FS) != 0) return -1;
    owned = 1;
    current = umask(0);
    umask(current);
  }
  if (mask != current) {
    umask(mask);
    current = mask;
  }
  return 0;
}

const char *cposix_errno_name(int value) { return strerrorname_np(value); }
