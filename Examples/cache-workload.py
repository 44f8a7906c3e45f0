#!/usr/bin/env python3
"""A deterministic cache workload for quota experiments (appbox experiment).

Fetches ITEMS items ACCESSES times through a cache in $XDG_CACHE_HOME/items: an item
found there is read (a hit), a missing one is "downloaded" (written, ITEM_KIB KiB). The
accesses follow a fixed skewed sequence (a few items are popular), the same on every run,
so purge cost depends only on the capacity. ENOSPC on a write is counted, not fatal.

usage: cache-workload.py [ITEMS [ACCESSES [ITEM_KIB]]]   (default 48 400 256)
"""
import errno
import os
import sys


def main():
    items, accesses, kib = (int(a) for a in (sys.argv[1:] + ["48", "400", "256"][len(sys.argv) - 1:])[:3])
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "items")
    os.makedirs(cache, exist_ok=True)
    payload = bytes(range(256)) * (kib * 4)
    state = 12345
    hits = misses = no_space = 0
    for _ in range(accesses):
        state = (state * 1103515245 + 12345) % 2**31  # a fixed LCG: the same sequence every run
        u = state / 2**31
        path = os.path.join(cache, "item-%03d" % int(items * u * u))
        if os.path.exists(path):
            with open(path, "rb") as f:
                f.read()
            hits += 1
            continue
        misses += 1
        try:
            with open(path, "wb") as f:
                f.write(payload)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
            no_space += 1
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    print("cache-workload: %d hits, %d misses, %d ENOSPC" % (hits, misses, no_space))


if __name__ == "__main__":
    main()
