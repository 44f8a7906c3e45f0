// Linux calls and constants that Swift's Glibc module does not export (they need
// _GNU_SOURCE, are variadic, or are raw syscalls). Every symbol starts with `cposix_`.
//
// Swift builds glibc's headers once, as a module, without _GNU_SOURCE, so defining it here
// has no effect: GNU-only functions go through syscall(2) and GNU-only constants use
// glibc's always-defined internal names (__O_PATH...) or the kernel's UAPI headers.
#ifndef APPBOX_CPOSIX_SHIM_H
#define APPBOX_CPOSIX_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/fsuid.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <spawn.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>

#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif
#ifndef SEEK_DATA
#define SEEK_DATA 3
#define SEEK_HOLE 4
#endif

/// fstatfs(2)'s f_type of `fd`'s filesystem in `*type`; 0, or -1 with errno.
static inline int cposix_fstatfs_type(int fd, long *type) {
  struct statfs st;
  int result = fstatfs(fd, &st);
  if (result == 0) *type = (long)st.f_type;
  return result;
}
static inline int cposix_o_path(void) { return __O_PATH; }
static inline int cposix_o_nofollow(void) { return O_NOFOLLOW; }
static inline int cposix_o_directory(void) { return O_DIRECTORY; }
static inline int cposix_o_direct(void) { return __O_DIRECT; }
static inline int cposix_o_noatime(void) { return __O_NOATIME; }
static inline int cposix_at_empty_path(void) { return AT_EMPTY_PATH; }
static inline int cposix_seek_data(void) { return SEEK_DATA; }
static inline int cposix_seek_hole(void) { return SEEK_HOLE; }
static inline unsigned cposix_rename_noreplace(void) { return RENAME_NOREPLACE; }
static inline unsigned cposix_rename_exchange(void) { return RENAME_EXCHANGE; }
static inline int cposix_falloc_keep_size(void) { return FALLOC_FL_KEEP_SIZE; }
static inline int cposix_falloc_punch_hole(void) { return FALLOC_FL_PUNCH_HOLE; }
static inline int cposix_falloc_zero_range(void) { return FALLOC_FL_ZERO_RANGE; }
static inline int cposix_falloc_insert_range(void) { return FALLOC_FL_INSERT_RANGE; }
static inline long cposix_utime_now(void) { return UTIME_NOW; }
static inline long cposix_utime_omit(void) { return UTIME_OMIT; }

static inline int cposix_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned flags) {
  return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}
/// `fchmodat2(fd, "", mode, AT_EMPTY_PATH)` (Linux 6.6+): a mode change through any
/// descriptor, an `O_PATH` one included (glibc 2.36 has no wrapper). -1/ENOSYS before.
static inline int cposix_fchmod_empty_path(int fd, mode_t mode) {
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
  return (int)syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH);
}

static inline int cposix_fallocate(int fd, int mode, off_t offset, off_t len) {
  return (int)syscall(SYS_fallocate, fd, mode, offset, len);
}
/// `sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
/// SYNC_FILE_RANGE_WAIT_AFTER)`: writes every dirty page of the file back and waits for
/// that I/O (no journal commit, no cache flush: not an fdatasync).
static inline int cposix_write_back(int fd) {
  return (int)syscall(SYS_sync_file_range, fd, (off_t)0, (off_t)0, 1 | 2 | 4);
}
static inline ssize_t cposix_copy_file_range(int in, off_t *off_in, int out, off_t *off_out, size_t len, unsigned flags) {
  return (ssize_t)syscall(SYS_copy_file_range, in, off_in, out, off_out, len, flags);
}
static inline int cposix_openat(int dirfd, const char *path, int flags, mode_t mode) {
  return openat(dirfd, path, flags, mode);
}
/// Closes every descriptor from `lowest` up in the child (glibc >= 2.34; declared by
/// glibc only under _GNU_SOURCE).
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
static inline int cposix_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int lowest) {
  return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}
static inline short cposix_spawn_setsid(void) { return 0x80; /* POSIX_SPAWN_SETSID, GNU-only */ }
/// A descriptor that becomes readable once process `pid` has exited (Linux >= 5.3).
static inline int cposix_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
// name_to_handle_at(2): `handle` points to a struct file_handle whose handle_bytes is set.
static inline int cposix_name_to_handle_at(int dirfd, const char *path, void *handle, int *mount_id, int flags) {
  return (int)syscall(SYS_name_to_handle_at, dirfd, path, handle, mount_id, flags);
}
// open_by_handle_at(2): needs CAP_DAC_READ_SEARCH; `handle` as for name_to_handle_at.
static inline int cposix_open_by_handle_at(int mount_fd, void *handle, int flags) {
  return (int)syscall(SYS_open_by_handle_at, mount_fd, handle, flags);
}

static inline ssize_t cposix_getxattr(const char *path, const char *name, void *value, size_t size) {
  return getxattr(path, name, value, size);
}
static inline int cposix_setxattr(const char *path, const char *name, const void *value, size_t size, int flags) {
  return setxattr(path, name, value, size, flags);
}
static inline int cposix_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags) {
  return fsetxattr(fd, name, value, size, flags);
}
static inline ssize_t cposix_listxattr(const char *path, char *list, size_t size) {
  return listxattr(path, list, size);
}
static inline int cposix_removexattr(const char *path, const char *name) { return removexattr(path, name); }

/// The pid, uid and gid of a Unix socket's peer as the kernel recorded them at connect
/// (SO_PEERCRED); 0 on success, -1 with errno set.
static inline int cposix_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid) {
  struct { int pid; unsigned uid; unsigned gid; } cred;
  socklen_t length = sizeof cred;
  if (getsockopt(fd, 1 /* SOL_SOCKET */, 17 /* SO_PEERCRED */, &cred, &length) != 0) return -1;
  *pid = cred.pid;
  *uid = cred.uid;
  *gid = cred.gid;
  return 0;
}

/// Bounds how long a blocking read and write on socket `fd` may wait (SO_RCVTIMEO and
/// SO_SNDTIMEO); 0 on success, -1 with errno set.
static inline int cposix_socket_timeouts(int fd, long milliseconds) {
  struct timeval limit = { .tv_sec = milliseconds / 1000, .tv_usec = (milliseconds % 1000) * 1000 };
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) != 0) return -1;
  return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
}

/// A pidfd of the process that connected to Unix socket `fd` (SO_PEERPIDFD, Linux 6.5;
/// close-on-exec, as every pidfd): the descriptor, or -1 with errno (ENOPROTOOPT on an
/// older kernel, ESRCH when that process is gone).
static inline int cposix_peer_pidfd(int fd) {
  int pidfd = -1;
  socklen_t length = sizeof pidfd;
  if (getsockopt(fd, 1 /* SOL_SOCKET */, 77 /* SO_PEERPIDFD */, &pidfd, &length) != 0) return -1;
  return pidfd;
}

/// `pidfd_send_signal(2)` without siginfo (signal 0 checks only that the process is still
/// there): 0, or -1 with errno (ESRCH once it has exited and been reaped).
static inline int cposix_pidfd_send_signal(int pidfd, int signal) {
  return (int)syscall(SYS_pidfd_send_signal, pidfd, signal, (void *)0, 0u);
}

/// `accept4(2)` with SOCK_CLOEXEC (accept4 is GNU-only).
static inline int cposix_accept_cloexec(int fd) {
  return (int)syscall(SYS_accept4, fd, (void *)0, (void *)0, 02000000 /* SOCK_CLOEXEC */);
}

/// `flock(2)`.
static inline int cposix_flock(int fd, int operation) { return flock(fd, operation); }
static inline int cposix_lock_exclusive_nonblocking(void) { return LOCK_EX | LOCK_NB; }
static inline int cposix_lock_shared(void) { return LOCK_SH; }

static inline int cposix_fcntl_int(int fd, int cmd, int arg) { return fcntl(fd, cmd, arg); }

/// Per-thread filesystem credentials. setfsuid/setfsgid are per-thread on Linux; the
/// supplementary groups go through the raw syscall because glibc's setgroups() changes
/// every thread of the process.
static inline int cposix_setfsuid(uid_t uid) { return setfsuid(uid); }
static inline int cposix_setfsgid(gid_t gid) { return setfsgid(gid); }
static inline int cposix_thread_setgroups(size_t count, const gid_t *groups) {
  return (int)syscall(SYS_setgroups, count, groups);
}

/// Sets the calling thread's umask to `mask`, the thread having first taken a filesystem
/// context (umask, working directory, root) of its own (unshare(CLONE_FS), once per
/// thread), so that no other thread's changes; a umask the thread already has costs no
/// system call (in shim.c). Returns 0, or -1 with errno (then nothing changed).
int cposix_set_thread_umask(mode_t mask);
/// The symbolic name of an errno value (`EIO`), or NULL when it has none (shim.c).
const char *cposix_errno_name(int value);

/// How many CPUs the calling thread may run on (its affinity mask, which a container's
/// cpuset or taskset narrows); 1 when unknown. CPU_COUNT and sched_getaffinity are GNU-only.
static inline int cposix_available_cpus(void) {
  unsigned long mask[64] = {0};  // 4,096 CPUs
  long size = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
  int count = 0;
  for (long word = 0; word < size / (long)sizeof mask[0]; word++) count += __builtin_popcountl(mask[word]);
  return count > 0 ? count : 1;
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)` (prctl is variadic): orphaned descendants are
/// re-parented to the calling process instead of init. Returns 0, or -1 with errno.
static inline int cposix_set_child_subreaper(void) { return (int)syscall(SYS_prctl, 36 /* PR_SET_CHILD_SUBREAPER */, 1UL, 0UL, 0UL, 0UL); }

/// The calling thread's id (`gettid`), as `/proc/self/task` names it.
static inline pid_t cposix_gettid(void) { return (pid_t)syscall(SYS_gettid); }

/// `appbox run`: installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT that forward
/// each signal sent by a process (not a terminal's, which reaches the program itself) to
/// the pid given to `cposix_forward_signals_to`, or keep it until there is one
/// (signal_forwarding.c). Returns 0, or -1 with errno.
int cposix_forward_signals_install(void);
/// Sets the process that receives forwarded signals (0: none yet, keep them); delivers a
/// signal kept meanwhile.
void cposix_forward_signals_to(pid_t pid);
/// Spawn attributes for a program started as a shell starts one: no signal blocked, and
/// SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE at their default action. Returns 0 or -1.
int cposix_spawnattr_reset_signals(posix_spawnattr_t *attributes);
/// Starts `program` (looked up in PATH) with `argv` and `envp` as a child placed in the
/// cgroup v2 directory `cgroup_fd` from its first instant (clone3 with CLONE_INTO_CGROUP,
/// Linux >= 5.7), no signal blocked and the termination signals and SIGPIPE at their
/// default action (cgroup_spawn.c). Returns 0 and sets `*pid`, or the error of the clone
/// (EACCES: no right to write that group's cgroup.procs) or of the exec (the child is
/// reaped).
int cposix_spawn_into_cgroup(const char *program, char *const argv[], char *const envp[], int cgroup_fd, pid_t *pid);
/// pidfd_open(2) with PIDFD_THREAD (Linux >= 6.9): a descriptor of thread `tid` alone,
/// readable once that thread has exited.
static inline int cposix_pidfd_open_thread(pid_t tid) { return (int)syscall(SYS_pidfd_open, tid, O_EXCL); }
/// An epoll set (close-on-exec) of descriptors watched once each for readability, named
/// by a key (epoll_event is packed, which Swift does not import well).
static inline int cposix_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int cposix_epoll_watch_once(int epoll, int fd, uint64_t key) {
  struct epoll_event event = {.events = EPOLLIN | EPOLLONESHOT, .data = {.u64 = key}};
  return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}
/// Waits for at least one event; writes up to `capacity` keys. Returns their count or -1.
static inline int cposix_epoll_wait_keys(int epoll, uint64_t *keys, int capacity) {
  struct epoll_event events[64];
  if (capacity > 64) capacity = 64;
  int count = epoll_wait(epoll, events, capacity, -1);
  for (int i = 0; i < count; i++) keys[i] = events[i].data.u64;
  return count;
}
/// mount(2) of a cgroup v2 hierarchy at `target`.
static inline int cposix_mount_cgroup2(const char *target) { return mount("none", target, "cgroup2", 0, NULL); }


// fanotify(7) permission events (fanotify.c).
/// A group for permission events, close-on-exec, with no limit on marks. -1 with errno.
int cposix_fanotify_group(void);
/// Adds (`add`) or removes read permission events (FAN_ACCESS_PERM) on the inode at
/// `path`: to the mark's mask, or to its ignore mask (`ignore`: such events are dropped
/// in the kernel). 0, or -1 with errno.
int cposix_fanotify_mark(int group, int add, int ignore, const char *path);
/// Blocks for events and stores up to `max` of their descriptors in `fds`: the count, or
/// -1 with errno. Each must be answered (cposix_fanotify_respond) and closed.
int cposix_fanotify_read(int group, int32_t *fds, int max);
/// Answers the event of descriptor `fd`: allow, or deny (the access fails with EPERM).
int cposix_fanotify_respond(int group, int32_t fd, int allow);

// A futex word to sleep on until it changes (wait_word.c), for Posix's Condition.
/// Two counters, zero-initialised: notifications so far, and threads about to sleep.
typedef struct cposix_wait_word {
  uint32_t count;
  uint32_t waiters;
} cposix_wait_word;
/// The notifications so far (sequentially consistent load).
uint32_t cposix_wait_word_load(cposix_wait_word *word);
/// Sleeps while the count is still `seen`, at most `timeout_ns` nanoseconds (negative: no
/// limit). Returns ETIMEDOUT when the time ran out, else 0 (notified, the count had moved
/// on already, a signal, or a spurious wake-up: the caller checks its condition again).
int cposix_wait_word_wait(cposix_wait_word *word, uint32_t seen, int64_t timeout_ns);
/// Counts a notification and wakes every sleeper (no system call when none sleeps).
void cposix_wait_word_notify_all(cposix_wait_word *word);

#endif
