// Starting `appbox run --app`'s program directly in its run's cgroup (clone3 with
// CLONE_INTO_CGROUP), so that no instant of the program, nor of anything it starts, is
// outside it.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "CPosixShim.h"

int cposix_spawn_into_cgroup(const char *program, char *const argv[], char *const envp[], int cgroup_fd, pid_t *pid) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return errno;
  struct clone_args args;
  memset(&args, 0, sizeof args);
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = (uint64_t)cgroup_fd;
  long child = syscall(SYS_clone3, &args, sizeof args);
  if (child < 0) {
    int error = errno;
    close(report[0]);
    close(report[1]);
    return error;
  }
  if (child == 0) {
    // The child of a multithreaded process: async-signal-safe calls only, then exec.
    close(report[0]);
    const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (unsigned i = 0; i < sizeof signals / sizeof signals[0]; i++) signal(signals[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvpe(program, argv, envp);
    int error = errno;
    ssize_t ignored = write(report[1], &error, sizeof error);
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  int error = 0;
  ssize_t count;
  do { count = read(report[0], &error, sizeof error); } while (count < 0 && errno == EINTR);
  close(report[0]);
  if (count == (ssize_t)sizeof error) {
    int status;
    while (waitpid((pid_t)child, &status, 0) < 0 && errno == EINTR) {}
    return error;
  }
  *pid = (pid_t)child;
  return 0;
}
