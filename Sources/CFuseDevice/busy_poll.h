// Busy polling (busy_poll.c), for the reader (reader.c).
#ifndef APPBOX_CFUSE_DEVICE_BUSY_POLL_H
#define APPBOX_CFUSE_DEVICE_BUSY_POLL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/// Whether a request is waiting on `fd` (or reading it would fail at once).
bool cfuse_device_request_queued(int fd);

/// Reads the next request from `fd` as read(2) does, polling for it first while requests
/// come back to back. `queued`: the caller has just seen a request waiting (no poll then).
ssize_t cfuse_device_read_request(int fd, void *buf, size_t len, bool queued);

#endif
