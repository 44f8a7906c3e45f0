// Forwarding of termination signals from `appbox run` to the program it runs.
#define _GNU_SOURCE
// A signal handler is the one place where this must be C: it may only call
// async-signal-safe functions (kill) and touch `volatile sig_atomic_t` state.
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include "CPosixShim.h"

static volatile sig_atomic_t cposix_forward_pid = 0;
static volatile sig_atomic_t cposix_forward_pending = 0;

static void cposix_forward_handler(int signal_number, siginfo_t *info, void *context) {
  (void)context;
  // A terminal's ^C, ^\ and hangup reach the whole foreground process group, the program
  // included: forwarding them would deliver them twice.
  if (info != NULL && info->si_code == SI_KERNEL) return;
  pid_t pid = cposix_forward_pid;
  if (pid > 0) {
    kill(pid, signal_number);
  } else {
    cposix_forward_pending = signal_number;
  }
}

int cposix_forward_signals_install(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = cposix_forward_handler;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigset_t forwarded;
  sigemptyset(&forwarded);
  const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  for (unsigned i = 0; i < sizeof signals / sizeof signals[0]; i++) {
    if (sigaction(signals[i], &action, NULL) != 0) return -1;
    sigaddset(&forwarded, signals[i]);
  }
  // A process started from a thread that blocks signals (a dispatch worker's mask, say)
  // inherits that mask: the signals would stay pending instead of being forwarded.
  return pthread_sigmask(SIG_UNBLOCK, &forwarded, NULL) == 0 ? 0 : -1;
}

int cposix_spawnattr_reset_signals(posix_spawnattr_t *attributes) {
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
  for (unsigned i = 0; i < sizeof signals / sizeof signals[0]; i++) sigaddset(&defaults, signals[i]);
  if (posix_spawnattr_setsigmask(attributes, &none) != 0) return -1;
  if (posix_spawnattr_setsigdefault(attributes, &defaults) != 0) return -1;
  return posix_spawnattr_setflags(attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
}

void cposix_forward_signals_to(pid_t pid) {
  cposix_forward_pid = pid;
  if (pid > 0 && cposix_forward_pending != 0) {
    kill(pid, cposix_forward_pending);
    cposix_forward_pending = 0;
  }
}
