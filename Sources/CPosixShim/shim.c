// Most of this target is header-only (include/CPosixShim.h); what needs a thread-local
// lives here.
#define _GNU_SOURCE
#include <sched.h>

#include "CPosixShim.h"

int cposix_own_fs_context(void) {
  static __thread int owned;
  if (owned) return 0;
  if (unshare(CLONE_FS) != 0) return -1;
  owned = 1;
  return 0;
}
