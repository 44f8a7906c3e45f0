// Work a worker puts off until it has answered the next request, or has none to answer.
//
// Forgetting a node closes the daemon's descriptor of it, and when the file was unlinked
// that close is what frees it: the backing filesystem's work that bindfs does inside its
// unlink. Done at once, it would hold up the request that follows (after each unlink in an
// `rm -rf`, the kernel forgets the file and then asks for the directory's attributes).
// Deferred, it runs after that request is answered, while the program that sent it goes
// on, or straight away when nothing is waiting, so no descriptor stays open while idle.
//
// Over FUSE over io_uring nothing is put off: the worker that reads a forget from /dev/fuse
// serves no other program's requests (they come through the rings), so putting the forget
// off would only cost it a poll of the device before its next read.
#include "CFuseDevice.h"
#include "uring.h"

enum { DEFERRED_MAX = 16 };  // per worker: at most this many forgets (descriptors) wait

struct deferred_item {
  cfuse_deferred_fn work;
  void *context;
  uint64_t first, second;
};

static _Thread_local struct {
  size_t count;
  struct deferred_item items[DEFERRED_MAX];
} deferred;

void cfuse_device_defer(cfuse_deferred_fn work, void *context, uint64_t first, uint64_t second) {
  if (cfuse_uring_active()) {
    work(context, first, second);
    return;
  }
  if (deferred.count == DEFERRED_MAX) cfuse_device_run_deferred();
  deferred.items[deferred.count++] = (struct deferred_item){work, context, first, second};
}

bool cfuse_device_has_deferred(void) { return deferred.count > 0; }

void cfuse_device_run_deferred(void) {
  // Taken off the list first: the work may defer more (it then runs on the next call).
  size_t count = deferred.count;
  struct deferred_item items[DEFERRED_MAX];
  for (size_t i = 0; i < count; i++) items[i] = deferred.items[i];
  deferred.count = 0;
  for (size_t i = 0; i < count; i++) items[i].work(items[i].context, items[i].first, items[i].second);
}
