#!/usr/bin/env bash
# The systemd service that `cmake --install` puts in place (dist/): the
# build is installed into a scratch DESTDIR, and the unit, the sysusers.d
# and tmpfiles.d files must be where the build's settings say, the unit
# running the installed aftp as `aftp serve` with the documented command
# line, reloading with SIGHUP, stopping with SIGTERM after more than the
# drain timeout, as user aftp, hardened; `systemd-analyze verify`, where
# it is installed, finds nothing to say about it. Then, where pkg-config
# knows systemd, dist/ alone configured for an install into systemd's own
# prefix puts the unit in systemd's unit directory, running PREFIX/bin/aftp.
# Usage: install_unit.sh SOURCE_DIR BUILD_DIR PREFIX BINDIR UNIT_DIR SYSUSERS_DIR TMPFILES_DIR
#   (CMAKE_INSTALL_PREFIX, CMAKE_INSTALL_FULL_BINDIR, AFTP_SYSTEMD_UNIT_DIR,
#   AFTP_SYSUSERS_DIR, AFTP_TMPFILES_DIR; relative directories are
#   beneath PREFIX)
set -uo pipefail
[ $# = 7 ] || { echo "usage: $0 SOURCE_DIR BUILD_DIR PREFIX BINDIR UNIT_DIR SYSUSERS_DIR TMPFILES_DIR" >&2; exit 2; }
SOURCE=$1
shift
BUILD=$1 PREFIX=$2 BINDIR=$3
DEST=$(mktemp -d "${TMPDIR:-/tmp}/aftp-unit-XXXXXX")
trap 'rm -rf "$DEST"' EXIT
fail() {
    echo "FAIL [unit_install]: $*" >&2
    exit 1
}
beneath_prefix() { # DIR: absolute, or PREFIX/DIR
    case $1 in
    /*) echo "$1" ;;
    *) echo "$PREFIX/$1" ;;
    esac
}
# The drain timeout's default (aftp_server_set_drain_timeout_ms), which
# the stop timeout must exceed.
DRAIN_S=30

DESTDIR=$DEST cmake --install "$BUILD" >"$DEST/install.log" 2>&1 ||
    fail "cmake --install: $(cat "$DEST/install.log")"
UNIT=$DEST$(beneath_prefix "$4")/aftp.service
[ -f "$UNIT" ] || fail "no unit at $UNIT: $(find "$DEST" -name 'aftp.service*')"
[ -f "$DEST$(beneath_prefix "$5")/aftp.conf" ] || fail "no sysusers.d/aftp.conf under $5"
[ -f "$DEST$(beneath_prefix "$6")/aftp.conf" ] || fail "no tmpfiles.d/aftp.conf under $6"
grep -q '^u aftp ' "$DEST$(beneath_prefix "$5")/aftp.conf" || fail "sysusers.d makes no user aftp"
grep -q '^d /srv/aftp .* aftp aftp' "$DEST$(beneath_prefix "$6")/aftp.conf" ||
    fail "tmpfiles.d makes no /srv/aftp for aftp"

# The unit's command is the installed aftp, which runs.
exec_start="ExecStart=$BINDIR/aftp serve --listen 7400 --dir /srv/aftp --identity /etc/aftp/server.key --authorized-keys /etc/aftp/authorized_keys"
grep -qxF "$exec_start" "$UNIT" || fail "the unit lacks '$exec_start': $(grep ExecStart "$UNIT")"
[ -x "$DEST$BINDIR/aftp" ] || fail "no aftp at $DEST$BINDIR, where ExecStart runs it"
"$DEST$BINDIR/aftp" serve >/dev/null 2>"$DEST/serve.err"
[ $? = 2 ] && grep -q "serve needs --listen" "$DEST/serve.err" ||
    fail "the installed aftp does not know serve: $(cat "$DEST/serve.err")"

# shellcheck disable=SC2016 # $MAINPID is systemd's, literal in the unit
for line in 'ExecReload=/bin/kill -HUP $MAINPID' KillSignal=SIGTERM User=aftp Group=aftp \
    NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths=/srv/aftp PrivateTmp=yes \
    ProtectHome=yes WantedBy=multi-user.target; do
    grep -qxF "$line" "$UNIT" || fail "the unit lacks '$line'"
done
stop_s=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$UNIT")
[ -n "$stop_s" ] && [ "$stop_s" -gt "$DRAIN_S" ] ||
    fail "TimeoutStopSec '$stop_s' is not above the drain timeout ($DRAIN_S s)"
grep -q '@[A-Z_]*@' "$UNIT" && fail "the unit holds an unconfigured @VARIABLE@"

# systemd's own check, on a copy that runs the aftp installed here (it
# checks that the command exists).
if command -v systemd-analyze >/dev/null; then
    mkdir "$DEST/verify"
    sed "s|^ExecStart=$BINDIR/|ExecStart=$DEST$BINDIR/|" "$UNIT" >"$DEST/verify/aftp.service"
    systemd-analyze verify --man=no "$DEST/verify/aftp.service" >"$DEST/verify.out" 2>&1 ||
        fail "systemd-analyze verify: $(cat "$DEST/verify.out")"
    [ -s "$DEST/verify.out" ] && fail "systemd-analyze verify: $(cat "$DEST/verify.out")"
else
    echo "note: no systemd-analyze, the unit's syntax is not checked"
fi

# An install into systemd's own prefix: systemd's unit directory.
if ! systemd_prefix=$(pkg-config --variable=prefix systemd 2>/dev/null) || [ -z "$systemd_prefix" ]; then
    echo "note: pkg-config does not know systemd: the unit directory it names is not checked"
    echo "PASS [unit_install]"
    exit 0
fi
unit_dir=$(pkg-config --variable=systemdsystemunitdir systemd)
mkdir "$DEST/sys" "$DEST/sys/src"
printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(aftp_dist NONE)' \
    'include(GNUInstallDirs)' 'find_package(PkgConfig REQUIRED)' \
    "add_subdirectory($SOURCE/dist dist)" >"$DEST/sys/src/CMakeLists.txt"
cmake -S "$DEST/sys/src" -B "$DEST/sys/build" -DCMAKE_INSTALL_PREFIX="$systemd_prefix" \
    >"$DEST/sys/log" 2>&1 || fail "cmake of dist/ for $systemd_prefix: $(cat "$DEST/sys/log")"
DESTDIR=$DEST/sys/root cmake --install "$DEST/sys/build" >"$DEST/sys/log" 2>&1 ||
    fail "cmake --install of dist/ for $systemd_prefix: $(cat "$DEST/sys/log")"
[ -f "$DEST/sys/root$unit_dir/aftp.service" ] ||
    fail "an install into $systemd_prefix put no unit in $unit_dir: $(find "$DEST/sys/root" -type f)"
grep -q "^ExecStart=$systemd_prefix/bin/aftp serve " "$DEST/sys/root$unit_dir/aftp.service" ||
    fail "an install into $systemd_prefix runs $(grep ExecStart "$DEST/sys/root$unit_dir/aftp.service")"
echo "PASS [unit_install]"
