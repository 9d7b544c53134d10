# Sourced by the abi tests that work against an installed aftp:
#   install_prefix BUILD_DIR
# installs the build into a temporary prefix (`cmake --install --prefix`)
# and sets
#   work    a temporary directory for everything the test writes, removed
#           when the shell exits,
#   prefix  $work/prefix, the installed tree,
#   PKG_CONFIG_PATH  (exported) the directory of its aftp.pc.
# The manifest that CMake's install writes into the build tree is put back
# as it was when the shell exits (so tests that install lock it: ctest's
# RESOURCE_LOCK aftp_install_manifest).
# Also defines fail MESSAGE: prints "FAIL: MESSAGE" and exits 1.
# shellcheck shell=sh

fail() {
    echo "FAIL: $*"
    exit 1
}

install_prefix() {
    work=$(mktemp -d)
    manifest=$1/install_manifest.txt
    [ ! -f "$manifest" ] || cp "$manifest" "$work/install_manifest.txt"
    trap install_prefix_restore EXIT
    prefix=$work/prefix
    cmake --install "$1" --prefix "$prefix" >"$work/install.log" ||
        { cat "$work/install.log"; fail "cmake --install $1 --prefix $prefix"; }
    export PKG_CONFIG_PATH
    PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name aftp.pc)")
}

install_prefix_restore() {
    if [ -f "$work/install_manifest.txt" ]; then
        cp "$work/install_manifest.txt" "$manifest"
    else
        rm -f "$manifest"
    fi
    rm -rf "$work"
}
