#!/usr/bin/env python3
"""Compares a source tree with what a receiver made of it.

Usage: tree_compare.py SRC DST [EXCLUDED...]
Every entry beneath SRC (but the EXCLUDED relative paths) must be beneath
DST with the same kind, the same bytes (files), the same target (links),
the same modification time in nanoseconds and the same permission bits
(files and directories); DST must hold nothing else but the receiver's
.aftp-partial; the EXCLUDED paths must be absent from DST. Prints the first
difference and exits 1, else exits 0.
"""
import os
import stat
import sys


def entries(root, skip):
    found = {}
    for here, dirs, files in os.walk(root):
        rel_here = os.path.relpath(here, root)
        dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(rel_here, d)) not in skip]
        for name in dirs + files:
            rel = os.path.normpath(os.path.join(rel_here, name))
            if rel not in skip:
                found[rel] = os.lstat(os.path.join(root, rel))
    return found


def differ(src, dst, rel, a, b):
    if stat.S_IFMT(a.st_mode) != stat.S_IFMT(b.st_mode):
        return "a different kind"
    if stat.S_ISLNK(a.st_mode):
        same = os.readlink(os.path.join(src, rel)) == os.readlink(os.path.join(dst, rel))
        return None if same else "another link target"
    if stat.S_IMODE(a.st_mode) != stat.S_IMODE(b.st_mode):
        return f"mode {oct(stat.S_IMODE(b.st_mode))}, not {oct(stat.S_IMODE(a.st_mode))}"
    if a.st_mtime_ns != b.st_mtime_ns:
        return f"mtime {b.st_mtime_ns}, not {a.st_mtime_ns}"
    if stat.S_ISREG(a.st_mode):
        with open(os.path.join(src, rel), "rb") as x, open(os.path.join(dst, rel), "rb") as y:
            if x.read() != y.read():
                return "other bytes"
    return None


def main():
    src, dst = sys.argv[1], sys.argv[2]
    excluded = {os.path.normpath(p) for p in sys.argv[3:]}
    want = entries(src, excluded)
    got = entries(dst, {".aftp-partial"})
    for rel in sorted(want):
        if rel not in got:
            print(f"{rel!r} is missing")
            return 1
        why = differ(src, dst, rel, want[rel], got[rel])
        if why:
            print(f"{rel!r}: {why}")
            return 1
    extra = sorted(set(got) - set(want))
    if extra:
        print(f"unexpected at the receiver: {extra[:5]!r}")
        return 1
    for rel in excluded:
        if os.path.lexists(os.path.join(dst, rel)):
            print(f"{rel!r} should not be at the receiver")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
