#!/bin/sh
# libaftp's exported symbols against the ledger (lib/libaftp.symbols) and the
# public headers: the three lists must be the same, name for name.
#   - the symbols libaftp.so defines (`nm -D --defined-only`: functions and
#     data alike, whatever their name);
#   - the ledger, one name per line, sorted (LC_ALL=C);
#   - the functions the headers (*.h in each HEADER_DIR: include/aftp/ and
#     the build tree's, which holds the generated version header) declare
#     AFTP_EXTERN.
# A name in one list and not another is printed with the list it is missing
# from, and the test fails.
# Usage: check_symbols.sh LIBAFTP_SO LEDGER HEADER_DIR...
set -eu
[ $# -ge 3 ] || { echo "usage: $0 LIBAFTP_SO LEDGER HEADER_DIR..." >&2; exit 2; }
so=$1
ledger=$2
shift 2
export LC_ALL=C
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Defined dynamic symbols; a version suffix (@@NODE), if ever used, is not
# part of the name.
nm -D --defined-only "$so" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' |
    sort -u >"$work/exported"
sort -c "$ledger" || { echo "FAIL: $ledger is not sorted (LC_ALL=C sort)"; exit 1; }
sort -u "$ledger" | grep -v '^$' >"$work/ledger"
# `AFTP_EXTERN <type> [*]aftp_name(` at the start of a line.
find "$@" -maxdepth 1 -name '*.h' -exec \
    sed -n 's/^AFTP_EXTERN [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' {} + |
    sort -u >"$work/declared"

describe() { # list
    case $1 in
    exported) echo "exported by $so" ;;
    ledger) echo "listed in $ledger" ;;
    declared) echo "declared AFTP_EXTERN in the headers" ;;
    esac
}

status=0
for list in exported ledger declared; do
    for other in exported ledger declared; do
        [ "$list" = "$other" ] && continue
        comm -23 "$work/$list" "$work/$other" >"$work/diff"
        [ -s "$work/diff" ] || continue
        status=1
        while read -r name; do
            echo "FAIL: $name is $(describe "$list") but not $(describe "$other")"
        done <"$work/diff"
    done
done
[ -s "$work/exported" ] || { echo "FAIL: $so exports nothing"; status=1; }
if [ $status -eq 0 ]; then
    echo "ok: $(wc -l <"$work/ledger") symbols, exported = ledger = declared AFTP_EXTERN"
fi
exit $status
