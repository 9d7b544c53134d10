#!/bin/sh
# Installs the build into a temporary prefix (`cmake --install --prefix`),
# checks that the aftp command and its manual are there, builds the program of consumer/ outside aftp's tree against it and runs
# it, once against the shared libaftp and once against libaftp.a linked
# whole into a shared object of the program's own (which only links when
# every object of libaftp.a is position-independent):
#   pkg-config  `pkg-config --cflags --libs aftp` (also from C++, when a
#               c++ compiler is there); the static case with
#               `pkg-config --static --libs aftp` (Requires/Libs.private)
#   cmake       find_package(aftp COMPONENTS static): aftp::aftp and
#               aftp::aftp_static (consumer/CMakeLists.txt)
# Everything is written under one temporary directory, removed at the end
# (install_prefix.sh).
# Usage: install_check.sh pkg-config|cmake BUILD_DIR CONSUMER_DIR VERSION CC [CFLAGS]
#   CFLAGS: the build's sanitizer flags, which a program linking an
#   instrumented libaftp needs as well.
set -eu
[ $# -ge 5 ] || { echo "usage: $0 pkg-config|cmake BUILD_DIR CONSUMER_DIR VERSION CC [CFLAGS]" >&2; exit 2; }
mode=$1
build=$2
consumer=$3
version=$4
cc=$5
cflags=${6:-}

# shellcheck source=tests/abi/install_prefix.sh
. "$(dirname "$0")/install_prefix.sh"
install_prefix "$build"

# The command and its manual come with the library.
"$prefix/bin/aftp" --version | grep -q "^aftp $version " ||
    fail "$prefix/bin/aftp --version does not say $version"
[ -n "$(find "$prefix" -path '*/man1/aftp.1')" ] || fail "no man1/aftp.1 under $prefix"

# The public headers, each of them (installed_headers.txt, sorted).
(cd "$prefix/include/aftp" && ls) | LC_ALL=C sort >"$work/headers"
LC_ALL=C sort "$(dirname "$0")/installed_headers.txt" | diff - "$work/headers" >"$work/headers.diff" ||
    { cat "$work/headers.diff"; fail "headers under $prefix/include/aftp differ from installed_headers.txt (<: missing, >: extra)"; }

# run PROGRAM: runs it and checks what it printed.
run() {
    name=$(basename "$1")
    status=0
    "$1" >"$work/$name.out" || status=$?
    [ $status -eq 0 ] || { cat "$work/$name.out"; fail "$name exited with $status"; }
    grep -qx "version $version" "$work/$name.out" ||
        { cat "$work/$name.out"; fail "$name did not print 'version $version'"; }
    grep -q '^cancelled .' "$work/$name.out" ||
        { cat "$work/$name.out"; fail "$name printed no text for AFTP_ERR_CANCELLED"; }
    echo "ok: $mode: $name: $(tr '\n' ' ' <"$work/$name.out")"
}

# run_uv_user PROGRAM: runs consumer/uv_user.c's program and checks that
# the stopped callback said why the server could not run.
run_uv_user() {
    "$1" >"$work/uv_user.out" ||
        { cat "$work/uv_user.out"; fail "uv_user (the libuv tier from outside) failed"; }
    grep -q '^stopped AFTP_ERR_INVALID_ARGUMENT: .' "$work/uv_user.out" ||
        { cat "$work/uv_user.out"; fail "uv_user: the stopped callback did not say why"; }
    echo "ok: $mode: uv_user: $(tr '\n' ' ' <"$work/uv_user.out")"
}

# needs_libaftp FILE yes|no: whether FILE is dynamically linked to libaftp.
needs_libaftp() {
    if readelf -d "$1" | grep -q 'NEEDED.*\[libaftp\.so\.'; then found=yes; else found=no; fi
    [ "$found" = "$2" ] || fail "$(basename "$1"): NEEDED libaftp.so.*: $found, expected $2"
}

case $mode in
pkg-config)
    pkg-config --exists --print-errors aftp || fail "pkg-config finds no aftp in $PKG_CONFIG_PATH"
    [ "$(pkg-config --modversion aftp)" = "$version" ] ||
        fail "aftp.pc says version $(pkg-config --modversion aftp), not $version"
    libdir=$(pkg-config --variable=libdir aftp)
    # The public headers compile clean in a strict C99 user's build.
    # shellcheck disable=SC2046,SC2086 # pkg-config's output is word lists
    $cc $cflags -std=c99 -Wall -Wextra -Wpedantic -Wstrict-prototypes -Werror \
        -o "$work/consumer_shared" "$consumer/main.c" "$consumer/report.c" \
        $(pkg-config --cflags --libs aftp) -Wl,-rpath,"$libdir"
    needs_libaftp "$work/consumer_shared" yes
    run "$work/consumer_shared"

    # The libuv tier, as an embedder that runs its own loop builds it:
    # aftp.pc lists libuv in Requires.private, so the embedder names it.
    # shellcheck disable=SC2046,SC2086
    $cc $cflags -std=c99 -Wall -Wextra -Wpedantic -Wstrict-prototypes -Werror \
        -o "$work/uv_user" "$consumer/uv_user.c" \
        $(pkg-config --cflags --libs aftp libuv) -Wl,-rpath,"$libdir"
    run_uv_user "$work/uv_user"

    if command -v c++ >/dev/null; then
        # shellcheck disable=SC2046,SC2086
        c++ $cflags -Wall -Wextra -Wpedantic -Werror -o "$work/cxx_user" "$consumer/cxx_user.cpp" \
            $(pkg-config --cflags --libs aftp) -Wl,-rpath,"$libdir"
        run "$work/cxx_user"
    else
        echo "note: no c++ compiler: the headers' C linkage for C++ is not checked"
    fi

    private=
    for flag in $(pkg-config --static --libs aftp); do
        [ "$flag" = -laftp ] || private="$private $flag"
    done
    # shellcheck disable=SC2046,SC2086
    $cc $cflags -shared -fPIC -o "$work/libreport.so" "$consumer/report.c" \
        $(pkg-config --cflags aftp) \
        -Wl,--whole-archive "$libdir/libaftp.a" -Wl,--no-whole-archive $private
    needs_libaftp "$work/libreport.so" no
    # shellcheck disable=SC2086
    $cc $cflags -o "$work/consumer_static" "$consumer/main.c" \
        -L"$work" -lreport -Wl,-rpath,"$work"
    run "$work/consumer_static"
    ;;
cmake)
    cmake -S "$consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$cflags" >"$work/configure.log" 2>&1 ||
        { cat "$work/configure.log"; fail "find_package(aftp) project did not configure"; }
    cmake --build "$work/build" >"$work/build.log" 2>&1 ||
        { cat "$work/build.log"; fail "find_package(aftp) project did not build"; }
    needs_libaftp "$work/build/consumer_shared" yes
    needs_libaftp "$work/build/libreport_embedded.so" no
    run "$work/build/consumer_shared"
    run "$work/build/consumer_static"
    run_uv_user "$work/build/uv_user"
    ;;
*)
    fail "unknown mode '$mode' (pkg-config or cmake)"
    ;;
esac
