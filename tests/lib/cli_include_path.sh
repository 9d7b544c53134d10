#!/usr/bin/env bash
# The aftp command compiles with the public headers as its only include
# path: a public header compiles there, and each kind of the library's
# internal headers (common/, proto/, io/ and lib/ modules) fails to, so a
# private include in cli/ fails the build. Usage:
# cli_include_path.sh CC "DIR;DIR..." (the aftp target's include
# directories). Exit 0 pass, 1 fail.
set -u
CC=$1
IFS=';' read -r -a dirs <<<"$2"
flags=()
for d in "${dirs[@]}"; do [ -n "$d" ] && flags+=("-I$d"); done
probe() { # header: does a file including it compile?
    printf '#include "%s"\nint main(void) { return 0; }\n' "$1" |
        "$CC" "${flags[@]}" -fsyntax-only -x c - 2>/dev/null
}
bad=0
probe aftp/aftp.h || { echo "aftp/aftp.h does not compile with: ${flags[*]}"; bad=1; }
for internal in common/aftp_keyfile.h proto/aftp_wire.h aftp_push.h aftp_explain.h; do
    probe "$internal" && { echo "$internal compiles with the CLI's include path: ${flags[*]}"; bad=1; }
done
[ "$bad" -eq 0 ] && echo "the CLI's include path (${flags[*]}) has the public headers alone"
exit "$bad"
