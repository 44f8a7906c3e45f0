// Requests counted by opcode (counters.c), for the device I/O of either transport.
#ifndef APPBOX_CFUSE_DEVICE_COUNTERS_H
#define APPBOX_CFUSE_DEVICE_COUNTERS_H

#include <stdint.h>

/// Counts one request of `opcode` taken from the kernel: a relaxed atomic add, no lock.
void cfuse_device_count_request(uint32_t opcode);

#endif
