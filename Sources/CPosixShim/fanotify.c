// fanotify(7) permission events, for ReadGuard (Posix/PermissionEvents.swift). The event
// records are variable-length structures with trailing information records: parsed here.
#define _GNU_SOURCE
#include <sys/fanotify.h>

#include "CPosixShim.h"

int cposix_fanotify_group(void) {
  // FAN_UNLIMITED_MARKS: a mark per file open in passthrough mode, whatever the user's
  // max_user_marks (the group needs CAP_SYS_ADMIN anyway).
  return fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_UNLIMITED_MARKS, O_RDONLY | O_LARGEFILE | O_CLOEXEC);
}

int cposix_fanotify_mark(int group, int add, int ignore, const char *path) {
  unsigned int flags = add ? FAN_MARK_ADD : FAN_MARK_REMOVE;
  // The ignore mask survives writes to the file (by default a write clears it).
  if (ignore) flags |= FAN_MARK_IGNORED_MASK | (add ? FAN_MARK_IGNORED_SURV_MODIFY : 0);
  return fanotify_mark(group, flags, FAN_ACCESS_PERM, AT_FDCWD, path);
}

int cposix_fanotify_read(int group, int32_t *fds, int max) {
  char buffer[4096] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
  ssize_t length = read(group, buffer, sizeof buffer);
  if (length < 0) return -1;
  int count = 0;
  for (struct fanotify_event_metadata *event = (struct fanotify_event_metadata *)buffer;
       FAN_EVENT_OK(event, length); event = FAN_EVENT_NEXT(event, length)) {
    if (event->vers != FANOTIFY_METADATA_VERSION || event->fd < 0) continue;
    if (count < max) {
      fds[count++] = event->fd;
    } else {  // cannot happen (4096 bytes hold fewer events), but never leave one unanswered
      cposix_fanotify_respond(group, event->fd, 1);
      close(event->fd);
    }
  }
  return count;
}

int cposix_fanotify_respond(int group, int32_t fd, int allow) {
  struct fanotify_response response = {.fd = fd, .response = allow ? FAN_ALLOW : FAN_DENY};
  return write(group, &response, sizeof response) == (ssize_t)sizeof response ? 0 : -1;
}
