#!/usr/bin/env bash
# The test-only environment hooks are in a binary exactly when it was built
# with them (CMake option AFTP_TEST_HOOKS): a release build must not read
# AFTP_TEST_DROP, AFTP_TEST_RETRY or AFTP_IO_OFFLOAD.
# Usage: test_hooks_compiled.sh BINARY 1|0   (0: built without the hooks)
set -uo pipefail
binary=$1
built_with=$2
status=0
for name in AFTP_TEST_DROP AFTP_TEST_RETRY AFTP_IO_OFFLOAD; do
    if grep -aq "$name" "$binary"; then found=1; else found=0; fi
    if [ "$found" != "$built_with" ]; then
        echo "FAIL: $binary $([ "$found" = 1 ] && echo contains || echo lacks) $name," \
            "but AFTP_TEST_HOOKS is $([ "$built_with" = 1 ] && echo ON || echo OFF)" >&2
        status=1
    fi
done
exit "$status"
