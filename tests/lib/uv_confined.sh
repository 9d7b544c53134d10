#!/bin/sh
# <uv.h> stays in the drivers and the libuv tier: no source of proto/,
# common/, sender/, receiver/, lib/ (but lib/aftp_uv.c, the tier itself)
# or include/aftp/ (aftp_uv.h forward-declares the loop) includes it. On
# Debian uv.h sits in /usr/include, where every compiler finds it, so the
# build alone would not notice a stray one (DESIGN.md section 2).
# Usage: uv_confined.sh SOURCE_DIR
set -eu
[ $# -eq 1 ] || { echo "usage: $0 SOURCE_DIR" >&2; exit 2; }
cd "$1"
found=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]uv(\.h|/)' \
            --include='*.c' --include='*.h' --include='*.in' \
            proto common sender receiver lib include | grep -vx 'lib/aftp_uv.c' || true)
if [ -n "$found" ]; then
    for f in $found; do echo "FAIL: $f includes libuv's header (only io/ and lib/aftp_uv.c may)"; done
    exit 1
fi
grep -qE '^#include <uv\.h>' lib/aftp_uv.c || { echo "FAIL: lib/aftp_uv.c no longer includes <uv.h>: is this check still looking at the right files?"; exit 1; }
echo "ok: <uv.h> only in lib/aftp_uv.c among proto/ common/ sender/ receiver/ lib/ include/"
