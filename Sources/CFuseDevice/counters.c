// Requests counted by opcode as they are taken from the kernel, by either transport
// (/dev/fuse or io_uring), so that `appbox status --json` can say how many requests of
// each kind a workload cost. Each count is one relaxed atomic add on the request path: no
// lock, no order with anything else; a reader sees each counter's latest value, not a
// snapshot of all of them at one instant.
#include "counters.h"

#include "CFuseDevice.h"

#include <stdatomic.h>

// Opcodes 1 to 52 (include/uapi/linux/fuse.h, protocol 7.45); anything else (CUSE_INIT,
// a newer kernel's additions) is counted in slot 0.
static _Atomic uint64_t counts[CFUSE_DEVICE_OPCODES];

void cfuse_device_count_request(uint32_t opcode) {
  atomic_fetch_add_explicit(&counts[opcode < CFUSE_DEVICE_OPCODES ? opcode : 0], 1, memory_order_relaxed);
}

uint64_t cfuse_device_request_count(uint32_t opcode) {
  return opcode < CFUSE_DEVICE_OPCODES ? atomic_load_explicit(&counts[opcode], memory_order_relaxed) : 0;
}

const char *cfuse_device_opcode_name(uint32_t opcode) {
  // The kernel's names (enum fuse_opcode) without the FUSE_ prefix, in lower case.
  static const char *const names[CFUSE_DEVICE_OPCODES] = {
      [0] = "other",          [1] = "lookup",        [2] = "forget",           [3] = "getattr",
      [4] = "setattr",        [5] = "readlink",      [6] = "symlink",          [8] = "mknod",
      [9] = "mkdir",          [10] = "unlink",       [11] = "rmdir",           [12] = "rename",
      [13] = "link",          [14] = "open",         [15] = "read",            [16] = "write",
      [17] = "statfs",        [18] = "release",      [20] = "fsync",           [21] = "setxattr",
      [22] = "getxattr",      [23] = "listxattr",    [24] = "removexattr",     [25] = "flush",
      [26] = "init",          [27] = "opendir",      [28] = "readdir",         [29] = "releasedir",
      [30] = "fsyncdir",      [31] = "getlk",        [32] = "setlk",           [33] = "setlkw",
      [34] = "access",        [35] = "create",       [36] = "interrupt",       [37] = "bmap",
      [38] = "destroy",       [39] = "ioctl",        [40] = "poll",            [41] = "notify_reply",
      [42] = "batch_forget",  [43] = "fallocate",    [44] = "readdirplus",     [45] = "rename2",
      [46] = "lseek",         [47] = "copy_file_range", [48] = "setupmapping", [49] = "removemapping",
      [50] = "syncfs",        [51] = "tmpfile",      [52] = "statx",
  };
  return opcode < CFUSE_DEVICE_OPCODES && names[opcode] != NULL ? names[opcode] : NULL;
}
