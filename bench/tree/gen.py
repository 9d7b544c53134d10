#!/usr/bin/env python3
"""Writes the trees bench/tree.sh sends (random content, fixed seed).

usage: gen.py go-shape DIR   a tree of the Go 1.19 source tree's shape, for
                             when the golang-1.19-src package cannot be had:
                             8,176 files in 798 directories, 99 MB, file
                             sizes following the package's own quantiles
                             (median 2 KiB, 95% under 37 KiB, the largest
                             10 MiB), directories as deep as its (up to 10)
       gen.py small DIR N SIZE   N files of SIZE bytes, 100 to a directory
"""
import bisect
import math
import os
import random
import sys

# (cumulative share of files, size in bytes) measured on
# /usr/share/go-1.19/src (golang-1.19-src 1.19.8-2): every 5% up to 95%,
# then every 0.5%, then the largest files themselves.
GO_SIZE_QUANTILES = [
    (0.00, 1), (0.05, 192), (0.10, 290), (0.15, 373), (0.20, 472), (0.25, 608),
    (0.30, 775), (0.35, 1009), (0.40, 1284), (0.45, 1637), (0.50, 2033),
    (0.55, 2558), (0.60, 3206), (0.65, 4126), (0.70, 5526), (0.75, 7198),
    (0.80, 9564), (0.85, 12796), (0.90, 19048), (0.95, 37183), (0.955, 40738),
    (0.96, 44564), (0.965, 48522), (0.97, 53956), (0.975, 62106), (0.98, 71128),
    (0.985, 87295), (0.99, 120432), (0.995, 285135), (0.9996, 1416934),
    (0.9998, 2618942), (1.0, 10864368)]
GO_FILES = 8176
# Directories per depth below the root (depth 1 .. 10).
GO_DIRS_AT_DEPTH = [46, 187, 123, 203, 65, 76, 48, 12, 35, 2]


def go_size(rng):
    """One file size: log-linear between the two quantiles around a uniform draw."""
    u = rng.random()
    shares = [q for q, _ in GO_SIZE_QUANTILES]
    i = max(1, bisect.bisect_left(shares, u))
    (q0, s0), (q1, s1) = GO_SIZE_QUANTILES[i - 1], GO_SIZE_QUANTILES[i]
    t = (u - q0) / (q1 - q0)
    return int(math.exp(math.log(s0) + t * (math.log(s1) - math.log(s0))))


def go_dirs(rng, root):
    """Directories depth by depth, each under a random one a level up."""
    levels = [[root]]
    for count in GO_DIRS_AT_DEPTH:
        level = []
        for n in range(count):
            parent = rng.choice(levels[-1])
            level.append(os.path.join(parent, "d%d" % n))
        levels.append(level)
    return [d for level in levels for d in level]


def write_file(path, size, rng):
    with open(path, "wb") as f:
        f.write(rng.randbytes(size))


def go_shape(root):
    rng = random.Random(19)
    dirs = go_dirs(rng, root)
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    for n in range(GO_FILES):
        write_file(os.path.join(rng.choice(dirs), "f%d.go" % n), go_size(rng), rng)


def small(root, count, size):
    rng = random.Random(4096)
    for n in range(count):
        d = os.path.join(root, "d%03d" % (n // 100))
        if n % 100 == 0:
            os.makedirs(d, exist_ok=True)
        write_file(os.path.join(d, "f%05d" % n), size, rng)


def main(argv):
    if len(argv) == 3 and argv[1] == "go-shape":
        go_shape(argv[2])
    elif len(argv) == 5 and argv[1] == "small":
        small(argv[2], int(argv[3]), int(argv[4]))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
