#!/usr/bin/env bash
# The CLI is libaftp's first embedder: its parts ported onto the public API
# include nothing but public headers (<aftp/...> or "aftp/..." naming a file
# of include/aftp/), system headers, and CLI headers that pass this check
# themselves. Usage: cli_public_headers.sh SOURCE_DIR. Exit 0 pass, 1 fail.
#
# PORTED grows as the CLI moves onto the public API: aftp_cli_send.c, the
# send side of aftp_cli_report.c and aftp_cli_keys.c join it when aftp send
# runs on the client API's callbacks (aftp_cli_recv.c runs on the server
# API). Then cli/ can link libaftp with its internal include directories
# PRIVATE.
set -u
SRC=$1
PORTED="cli/aftp_cli_base.h cli/aftp_cli_json.c cli/aftp_cli_recv.c cli/aftp_cli_tofu.c"
bad=0

say() {
    echo "$1"
    bad=1
}

ported() { # a CLI header named in an include: is it checked too?
    case " $PORTED " in *" cli/$1 "*) return 0 ;; esac
    return 1
}

check_include() { # file, the include's <name> or "name"
    local file=$1 inc=$2 name=${2:1:${#2}-2}
    case $inc in
    '"aftp/'* | '<aftp/'*)
        [ -f "$SRC/include/$name" ] || [ -f "$SRC/include/$name.in" ] ||
            say "$file: $inc is not a header of include/aftp/" ;;
    '"'*)
        ported "$name" || say "$file: $inc is not a public header (nor a CLI header on the public API)" ;;
    '<aftp'* | '<common/'* | '<proto/'* | '<io/'* | '<lib/'*)
        say "$file: $inc is one of the library's internal headers" ;;
    esac
}

for file in $PORTED; do
    [ -f "$SRC/$file" ] || { say "$file: missing"; continue; }
    while read -r inc; do
        check_include "$file" "$inc"
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p' "$SRC/$file")
done
[ "$bad" -eq 0 ] && echo "the ported CLI sources include only public headers: $PORTED"
exit "$bad"
