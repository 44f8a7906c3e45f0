// See reader.c: which worker thread takes the next request.
#ifndef APPBOX_CFUSE_DEVICE_READER_H
#define APPBOX_CFUSE_DEVICE_READER_H

#include <stddef.h>
#include <sys/types.h>

/// Reads the next request from `fd` into `buf` as read(2) does, once it is this thread's
/// turn to read.
ssize_t cfuse_device_take_request(int fd, void *buf, size_t len);

#endif
