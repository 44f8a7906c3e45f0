#!/usr/bin/env python3
"""Metadata workload for bench.sh: create N empty files, stat them all, unlink them all.

One process, plain os.open/os.stat/os.unlink, each phase timed on its own.
Prints one line: "create=<ops/s> stat=<ops/s> unlink=<ops/s>".

Usage: metaops.py DIR COUNT
"""

import os
import sys
import time


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: metaops.py DIR COUNT", file=sys.stderr)
        return 64
    directory, count = sys.argv[1], int(sys.argv[2])
    os.makedirs(directory, exist_ok=True)
    names = [os.path.join(directory, f"f{i:06d}") for i in range(count)]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC

    start = time.perf_counter()
    for name in names:
        os.close(os.open(name, flags, 0o644))
    created = time.perf_counter()
    for name in names:
        os.stat(name)
    statted = time.perf_counter()
    for name in names:
        os.unlink(name)
    unlinked = time.perf_counter()

    os.rmdir(directory)
    print(
        f"create={count / (created - start):.1f} "
        f"stat={count / (statted - created):.1f} "
        f"unlink={count / (unlinked - statted):.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
