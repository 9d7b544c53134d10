#!/usr/bin/env bash
# The CLI is libaftp's first embedder: every file of cli/ includes nothing
# but public headers (<aftp/...> or "aftp/..." naming a file of
# include/aftp/), system headers, and CLI headers, which pass this check
# themselves. The build holds it too (cli/ compiles with include/ as its
# only include path); this check names the offending line.
# Usage: cli_public_headers.sh SOURCE_DIR. Exit 0 pass, 1 fail.
set -u
SRC=$1
PORTED=$(cd "$SRC" && ls cli/*.c cli/*.h | tr '\n' ' ')
bad=0

say() {
    echo "$1"
    bad=1
}

ported() { # a CLI header named in an include: is it one of cli/?
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
        ported "$name" || say "$file: $inc is not a public header (nor a CLI header)" ;;
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
[ "$bad" -eq 0 ] && echo "the CLI sources include only public headers: $PORTED"
exit "$bad"
