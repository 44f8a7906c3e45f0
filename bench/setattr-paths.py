#!/usr/bin/env python3
"""What a mode change and a time change cost the daemon by each way it can make them
(#26 item 4; bench/README.md, "Requests per file"): through an O_PATH descriptor with an
empty path (fchmodat2 with AT_EMPTY_PATH, Linux 6.6+; utimensat with AT_EMPTY_PATH), or
through the descriptor's /proc/self/fd path, which the kernel resolves anew on each call.

Usage: bench/setattr-paths.py DIR [--files N] [--rounds R]
  DIR      a directory on the filesystem to measure (bench/README.md: a fresh ext4)
  --files  files, each changed once per round and way (default 2000)
  --rounds interleaved rounds; the medians and ranges over them are printed (default 9)

Prints microseconds per call, one line per way, and the ratio of the medians. The calls go
through ctypes, which adds the same fixed cost to each way.
"""
import argparse, ctypes, os, statistics, sys, time

AT_EMPTY_PATH = 0x1000
SYS_FCHMODAT2 = 452
libc = ctypes.CDLL(None, use_errno=True)


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


TIMES = (Timespec * 2)(Timespec(1_000_000, 0), Timespec(2_000_000, 0))
EMPTY = b""


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        sys.exit(f"setattr-paths: {what}: {os.strerror(err)}")


def chmod_proc(fds, paths):
    for p in paths:
        check(libc.chmod(p, 0o640), "chmod through /proc/self/fd")


def chmod_empty(fds, paths):
    for fd in fds:
        check(libc.syscall(SYS_FCHMODAT2, fd, EMPTY, 0o640, AT_EMPTY_PATH), "fchmodat2 with AT_EMPTY_PATH")


def utimens_proc(fds, paths):
    for p in paths:
        check(libc.utimensat(-100, p, TIMES, 0), "utimensat through /proc/self/fd")


def utimens_empty(fds, paths):
    for fd in fds:
        check(libc.utimensat(fd, EMPTY, TIMES, AT_EMPTY_PATH), "utimensat with AT_EMPTY_PATH")


WAYS = [
    ("chmod through /proc/self/fd", chmod_proc),
    ("fchmodat2, empty path", chmod_empty),
    ("utimensat through /proc/self/fd", utimens_proc),
    ("utimensat, empty path", utimens_empty),
]


def main():
    parser = argparse.ArgumentParser(add_help=True)
    parser.add_argument("dir")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    if args.files < 1 or args.rounds < 1:
        sys.exit("setattr-paths: --files and --rounds must be positive")
    work = os.path.join(args.dir, f"setattr-paths.{os.getpid()}")
    os.mkdir(work)
    fds = []
    try:
        for i in range(args.files):
            path = os.path.join(work, f"f{i}")
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
            fds.append(os.open(path, os.O_PATH | os.O_NOFOLLOW))
        paths = [f"/proc/self/fd/{fd}".encode() for fd in fds]
        results = {name: [] for name, _ in WAYS}
        for round_ in range(args.rounds):
            order = WAYS[round_ % len(WAYS):] + WAYS[: round_ % len(WAYS)]
            for name, way in order:
                start = time.perf_counter_ns()
                way(fds, paths)
                results[name].append((time.perf_counter_ns() - start) / 1000 / args.files)
        for name, _ in WAYS:
            r = results[name]
            print(f"{name:34s} {statistics.median(r):6.2f} µs ({min(r):.2f}–{max(r):.2f})")
        for proc, empty in ((WAYS[0][0], WAYS[1][0]), (WAYS[2][0], WAYS[3][0])):
            print(f"{empty} / {proc}: {statistics.median(results[empty]) / statistics.median(results[proc]):.2f}")
    finally:
        for fd in fds:
            os.close(fd)
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)


if __name__ == "__main__":
    main()
