# shellcheck shell=bash
# Sourced by bench/wan.sh and tests/wan/: where the WAN runs keep their files.
#
# pick_scratch_dir BYTES: prints $AFTP_WAN_DIR when set, else /dev/shm when it
# is a tmpfs with room for BYTES, else ${TMPDIR:-/tmp}. Memory first because
# disk writeback can stall the machine for tens of milliseconds (seen on a
# 2-vCPU VM: the link emulator's real-time threads then deliver late and the
# run is declared INVALID, whatever the tools do).
pick_scratch_dir() {
    if [ -n "${AFTP_WAN_DIR:-}" ]; then
        echo "$AFTP_WAN_DIR"
    elif [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ] &&
        [ "$(($(stat -f -c '%a * %S' /dev/shm)))" -gt "$1" ]; then
        echo /dev/shm
    else
        echo "${TMPDIR:-/tmp}"
    fi
}
