// The one header through which Swift sees libfuse3's low-level API.
// It pins the API version and wraps, as static inline functions, what Swift cannot
// import: macros and versioned symbols. Every symbol defined here starts with `cfuse_`.
#ifndef APPBOX_CFUSE_SHIM_H
#define APPBOX_CFUSE_SHIM_H

#define FUSE_USE_VERSION 314
#include <errno.h>
#include <stddef.h>
#include <unistd.h>
#include <fuse_lowlevel.h>
#include <sys/stat.h>

_Static_assert(FUSE_VERSION >= FUSE_MAKE_VERSION(3, 14), "AppBox needs libfuse >= 3.14");
_Static_assert(sizeof(fuse_ino_t) == 8, "fuse_ino_t must be 64-bit");

/// fuse_session_loop_mt is a macro over a versioned symbol.
static inline int cfuse_session_loop_mt(struct fuse_session *se, unsigned max_idle, unsigned max_threads) {
  struct fuse_loop_config *config = fuse_loop_cfg_create();
  if (config == NULL) return -1;
  fuse_loop_cfg_set_idle_threads(config, max_idle);
  fuse_loop_cfg_set_max_threads(config, max_threads);
  fuse_loop_cfg_set_clone_fd(config, 1);
  int rc = fuse_session_loop_mt(se, config);
  fuse_loop_cfg_destroy(config);
  return rc;
}

/// FUSE_ARGS_INIT is a macro.
static inline struct fuse_args cfuse_args_init(int argc, char **argv) {
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  return args;
}

/// The capability bits are macros; Swift imports most but not all reliably.
static inline unsigned cfuse_cap_readdirplus(void) { return FUSE_CAP_READDIRPLUS; }
static inline unsigned cfuse_cap_readdirplus_auto(void) { return FUSE_CAP_READDIRPLUS_AUTO; }
static inline unsigned cfuse_cap_writeback_cache(void) { return FUSE_CAP_WRITEBACK_CACHE; }
static inline unsigned cfuse_cap_splice_write(void) { return FUSE_CAP_SPLICE_WRITE; }
static inline unsigned cfuse_cap_splice_move(void) { return FUSE_CAP_SPLICE_MOVE; }
static inline unsigned cfuse_cap_parallel_dirops(void) { return FUSE_CAP_PARALLEL_DIROPS; }
static inline unsigned cfuse_cap_cache_symlinks(void) { return FUSE_CAP_CACHE_SYMLINKS; }
static inline unsigned cfuse_cap_auto_inval_data(void) { return FUSE_CAP_AUTO_INVAL_DATA; }
static inline unsigned cfuse_cap_dont_mask(void) { return FUSE_CAP_DONT_MASK; }
static inline unsigned cfuse_cap_export_support(void) { return FUSE_CAP_EXPORT_SUPPORT; }
static inline unsigned cfuse_cap_posix_acl(void) { return FUSE_CAP_POSIX_ACL; }
static inline unsigned cfuse_cap_no_opendir_support(void) { return FUSE_CAP_NO_OPENDIR_SUPPORT; }

/// fuse_file_info's flag members are bitfields, which Swift imports but cannot take
/// part-wise on every toolchain; set them here.
static inline void cfuse_fi_set_keep_cache(struct fuse_file_info *fi, int on) { fi->keep_cache = on ? 1 : 0; }
static inline void cfuse_fi_set_direct_io(struct fuse_file_info *fi, int on) { fi->direct_io = on ? 1 : 0; }
static inline void cfuse_fi_set_noflush(struct fuse_file_info *fi, int on) { fi->noflush = on ? 1 : 0; }
static inline void cfuse_fi_set_cache_readdir(struct fuse_file_info *fi, int on) { fi->cache_readdir = on ? 1 : 0; }
/// A write request's: whether it is the kernel's writeback of cached pages (FUSE_WRITE_CACHE).
static inline int cfuse_fi_writepage(const struct fuse_file_info *fi) { return fi->writepage; }

/// Reads up to this many bytes are copied (pread, then one write to the device): for small
/// reads that is two system calls where splicing takes three and a pipe.
#define CFUSE_COPY_READ_MAX (64 * 1024)

/// Replies with `size` bytes read from `fd` at `offset`: small reads are copied, larger
/// ones spliced when libfuse can (the pages move into the device without a copy).
static inline int cfuse_reply_fd_data(fuse_req_t req, int fd, off_t offset, size_t size) {
  if (size <= CFUSE_COPY_READ_MAX) {
    char copy[CFUSE_COPY_READ_MAX];
    ssize_t got = pread(fd, copy, size, offset);
    if (got < 0) return fuse_reply_err(req, errno);
    return fuse_reply_buf(req, copy, (size_t)got);
  }
  struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
  buf.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
  buf.buf[0].fd = fd;
  buf.buf[0].pos = offset;
  return fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/// Copies the request's data buffer (which may be a pipe) into `fd` at `offset`.
/// Returns bytes written or -errno.
static inline ssize_t cfuse_write_buf_to_fd(struct fuse_bufvec *in, int fd, off_t offset) {
  struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
  out.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
  out.buf[0].fd = fd;
  out.buf[0].pos = offset;
  return fuse_buf_copy(&out, in, (enum fuse_buf_copy_flags)0);
}

/// Truncates a bufvec to at most `size` bytes (for partial writes under quota).
static inline void cfuse_bufvec_limit(struct fuse_bufvec *in, size_t size) {
  size_t left = size;
  for (size_t i = in->idx; i < in->count; i++) {
    size_t avail = in->buf[i].size - (i == in->idx ? in->off : 0);
    if (avail >= left) {
      in->buf[i].size = left + (i == in->idx ? in->off : 0);
      in->count = i + 1;
      return;
    }
    left -= avail;
  }
}

#endif
