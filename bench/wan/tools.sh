# shellcheck shell=bash
# shellcheck disable=SC2154 # work, src, size and cap are the caller's (see below)
# Sourced by bench/wan/run.sh and bench/whole/run.sh inside netem/wan.sh's
# command namespace: how each tool is measured over the emulated link, one
# JSON record per run appended to $BENCH_RESULTS (bench/wan/report.py record).
#
# The caller sets: work (scratch dir), src (the file), size (its bytes),
# cap (seconds a slow tool may run); and the environment BENCH_SRC_SHA (the
# file's sha256), BENCH_AFTP, BENCH_RATE (aftp --rate or "auto"),
# BENCH_IPERF_SECONDS, BENCH_RETRIES, BENCH_RESULTS, netem/wan.sh's WAN_*.
# BENCH_TAGS (an array of key=value words) goes into every record;
# BENCH_PHASES, when set, is bench/whole/phases.py: each aftp run is then
# split into its phases (from its progress log and the link's byte counts,
# sampled every 10 ms meanwhile), phase_* fields of its record.
wan_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
clk_tck=$(getconf CLK_TCK)
read -r -a snd <<<"$WAN_SND_EXEC" # command prefixes: run a command on a host
read -r -a rcv <<<"$WAN_RCV_EXEC"

BENCH_ATTEMPT=1
BENCH_TAGS=()
record() { python3 "$wan_dir/report.py" record "$BENCH_RESULTS" attempt="$BENCH_ATTEMPT" "${BENCH_TAGS[@]}" "$@"; }
log() { echo "bench: $*" >&2; }
secs_since() { # start in $EPOCHREALTIME format -> seconds elapsed
    awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'
}

# --- measurements shared by every tool ----------------------------------------

# shellcheck source=bench/wan/lib.sh
. "$wan_dir/lib.sh"

# TCP segments sent and retransmitted so far on the sender host: "OUT RETRANS".
tcp_counters() {
    "${snd[@]}" cat /proc/net/snmp | awk '
        $1 == "Tcp:" && !hdr { for (i = 2; i <= NF; i++) col[$i] = i; hdr = 1; next }
        $1 == "Tcp:" { print $col["OutSegs"], $col["RetransSegs"] }'
}

tcp_retrans_pct() { # "OUT RETRANS" before, after
    awk -v b="$1" -v a="$2" 'BEGIN { split(b, x); split(a, y)
        out = y[1] - x[1]; re = y[2] - x[2]
        if (out > 0) printf "%.2f", 100 * re / out; else print "null" }'
}

# CPU seconds of a long-lived process and of the children it has reaped
# (sshd's per-connection processes, uftpd's own work).
proc_cpu() { # PID
    awk -v t="$clk_tck" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13 + $14 + $15) / t }' \
        "/proc/$1/stat" 2>/dev/null || echo 0
}

time_field() { # GNU time file (-f '%e %U %S'), field: 1 elapsed, 2 user+system
    [ -s "$1" ] || { echo null; return; }
    tail -n 1 "$1" | awk -v f="$2" '{ if (f == 1) print $1; else printf "%.2f", $2 + $3 }'
}

dst_bytes() { # DIR: bytes of every file under it (rsync writes a hidden temporary)
    find "$1" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'
}

sha_matches() { # FILE
    [ -f "$1" ] && [ "$(sha256sum <"$1" | cut -d' ' -f1)" = "$BENCH_SRC_SHA" ]
}

descendants() { # PID: every descendant, depth first
    local p
    for p in $(pgrep -P "$1"); do
        echo "$p"
        descendants "$p"
    done
}

# run_capped NAME CAP DIR CMD...: runs CMD under GNU time, stdout/stderr to
# $work/NAME.{out,err}; at CAP seconds notes how many bytes reached DIR and
# kills CMD with all its descendants. Sets RUN_RC, RUN_SECS, RUN_CAPPED,
# RUN_CAPPED_BYTES, RUN_CPU.
run_capped() {
    local name=$1 limit=$2 dir=$3
    shift 3
    local start=$EPOCHREALTIME
    /usr/bin/time -f '%e %U %S' -o "$work/$name.time" "$@" >"$work/$name.out" 2>"$work/$name.err" &
    local tpid=$!
    RUN_CAPPED=false RUN_CAPPED_BYTES=0
    while kill -0 "$tpid" 2>/dev/null; do
        if awk -v s="$(secs_since "$start")" -v l="$limit" 'BEGIN { exit !(s >= l) }'; then
            RUN_CAPPED_BYTES=$(dst_bytes "$dir")
            RUN_SECS=$(secs_since "$start")
            RUN_CAPPED=true
            # shellcheck disable=SC2046
            kill -TERM $(descendants "$tpid") 2>/dev/null
            sleep 2
            # shellcheck disable=SC2046
            kill -KILL $(descendants "$tpid") 2>/dev/null
            break
        fi
        sleep 0.1
    done
    wait "$tpid"
    RUN_RC=$?
    [ "$RUN_CAPPED" = true ] || RUN_SECS=$(time_field "$work/$name.time" 1)
    RUN_CPU=$(time_field "$work/$name.time" 2)
}

# Records a file-moving tool's outcome from the run_capped variables.
record_file_tool() { # tool label framing dst_file retrans cpu_rcv [key=value...]
    local tool=$1 label=$2 framing=$3 file=$4 retrans=$5 cpu_rcv=$6
    shift 6
    local bytes verified=false error=''
    if [ "$RUN_CAPPED" = true ]; then
        bytes=$RUN_CAPPED_BYTES
    else
        bytes=$(stat -c %s "$file" 2>/dev/null || echo 0)
        sha_matches "$file" && verified=true
        [ "$RUN_RC" -eq 0 ] || error="exit status $RUN_RC: $(tail -n 1 "$work/$tool.err")"
    fi
    emu_fields
    record kind=tool tool="$tool" label="$label" framing="$framing" bytes="$bytes" \
        seconds="$RUN_SECS" capped="$RUN_CAPPED" verified="$verified" error="$error" \
        retrans_pct="$retrans" cpu_snd_s="$RUN_CPU" cpu_rcv_s="$cpu_rcv" "${EMU_FIELDS[@]}" "$@"
    rm -f "$file"
}

# Seconds a tool that should complete may take: long enough for the whole
# file at a quarter of the link rate, and at least the cap.
whole_file_limit() {
    awk -v b="$size" -v r="$WAN_FWD_RATE_BPS" -v c="$cap" \
        'BEGIN { t = 4 * b * 8 / r + 30; printf "%d", (t > c ? t : c) }'
}

emu_before() { emu_snapshot "$work/emu.before"; }
emu_fields() { # sets EMU_FIELDS: key=value words on the emulator since emu_before
    emu_snapshot "$work/emu.after"
    mapfile -t EMU_FIELDS < <(python3 "$wan_dir/report.py" emu-delta "$work/emu.before" "$work/emu.after")
}

# --- aftp ------------------------------------------------------------------------
run_aftp() { # tool [aftp send options...]
    local tool=$1 dst=$work/dst.aftp from=$src limit
    shift
    if [ "$tool" = aftp-faux ]; then
        from="faux:///$(basename "$src")?$size" dst=faux://
    else
        mkdir -p "$dst"
    fi
    limit=$(whole_file_limit)
    emu_before
    local start=$EPOCHREALTIME rc=0 watch_pid=''
    if [ -n "${BENCH_PHASES:-}" ]; then # the link's byte counts, for the phases
        python3 "$BENCH_PHASES" watch "$work/aftp.link" "$WAN_SND_PID" "$WAN_RCV_PID" "$WAN_IFACE" &
        watch_pid=$!
    fi
    "$wan_dir/aftp_pair.sh" "$BENCH_AFTP" "$from" "$dst" "$BENCH_RATE" "$limit" "$work/aftp" "$@" ||
        rc=$?
    local -a phases=()
    if [ -n "$watch_pid" ]; then
        kill -TERM "$watch_pid" 2>/dev/null
        wait "$watch_pid" 2>/dev/null
        mapfile -t phases < <(python3 "$BENCH_PHASES" split "$work/aftp.progress" "$work/aftp.link" \
            "$(cat "$work/aftp.send.start" 2>/dev/null)" "$(time_field "$work/aftp.send.time" 1)")
    fi
    local secs summary retrans verified=false error='' bytes=0
    secs=$(time_field "$work/aftp.send.time" 1)
    [ "$secs" != null ] || secs=$(secs_since "$start")
    summary=$(paste -sd ';' "$work/aftp.send.out" 2>/dev/null) # a table cell: one line
    retrans=$(printf '%s' "$summary" | sed -n 's/.* \([0-9.]*\)% retransmitted.*/\1/p')
    # A copy can be complete even when a side failed afterwards: show both.
    if [ "$dst" = faux:// ]; then # verified by the receiver, over zeros
        [ "$rc" -ne 0 ] || { bytes=$size verified=true; }
    else
        bytes=$(stat -c %s "$dst/$(basename "$src")" 2>/dev/null || echo 0)
        sha_matches "$dst/$(basename "$src")" && verified=true
    fi
    if [ "$rc" -ne 0 ]; then
        error="send exit $(cat "$work/aftp.send.rc"), recv exit $(cat "$work/aftp.recv.rc"):"
        error="$error $(tail -n 1 "$work/aftp.send.err")"
    fi
    emu_fields
    local -a steady
    mapfile -t steady < <(python3 "$wan_dir/report.py" steady "$work/aftp.progress" "$size")
    local options=${*:-"(default policy)"} rate_used
    rate_used=$(cat "$work/aftp.rate")
    [ "$rate_used" = none ] && rate_used="(no --rate)" || rate_used="--rate $rate_used"
    local what=aftp
    [ "$dst" != faux:// ] || what="aftp faux://"
    [ "$tool" != aftp-repeat ] || what="aftp (repeat contact: path memory)"
    record kind=tool tool="$tool" label="$what $options $rate_used" framing=aftp \
        bytes="$bytes" seconds="$secs" capped=false verified="$verified" error="$error" \
        retrans_pct="${retrans:-null}" cpu_snd_s="$(time_field "$work/aftp.send.time" 2)" \
        cpu_rcv_s="$(time_field "$work/aftp.recv.time" 2)" \
        note="own summary: ${summary#*: }" "${EMU_FIELDS[@]}" "${steady[@]}" "${phases[@]}"
    rm -f "$work/aftp.progress" "$work/aftp.link"
    [ "$dst" = faux:// ] || rm -rf "$dst"
}

# aftp as a repeat contact: the pair's keys and path memory are kept per link
# (AFTP_PAIR_STATE), so that every measured run starts from the rate an
# earlier transfer on this path measured (Careful Resume), as an MFT
# product's transfers to the same partner do all day. The link's first
# transfer, a first contact, only fills that memory and is not reported.
run_aftp_repeat() {
    local state=$work/repeat.$WAN_PROFILE
    if [ ! -d "$state.cache" ]; then
        mkdir -p "$work/dst.warm"
        AFTP_PAIR_STATE=$state "$wan_dir/aftp_pair.sh" "$BENCH_AFTP" "$src" "$work/dst.warm" \
            "$BENCH_RATE" "$(whole_file_limit)" "$work/warm" ||
            log "aftp-repeat: the first contact that fills the path memory failed: $(tail -n 1 "$work/warm.send.err")"
        rm -rf "$work/dst.warm"
    fi
    AFTP_PAIR_STATE=$state run_aftp aftp-repeat
}

# --- iperf3: the TCP ceiling, memory to memory ------------------------------------
run_iperf3() { # tool label buffer-note [iperf3 client options...]
    local tool=$1 label=$2 buffers=$3
    shift 3
    local port=5201 counters_before
    emu_before
    counters_before=$(tcp_counters)
    /usr/bin/time -f '%e %U %S' -o "$work/$tool.srv.time" "${rcv[@]}" \
        iperf3 -s -1 -B "$WAN_RCV_ADDR" -p "$port" >"$work/$tool.srv.out" 2>&1 &
    local spid=$!
    wait_listening t "$port" "${rcv[@]}" || log "$tool: iperf3 server did not start"
    run_capped "$tool" $((BENCH_IPERF_SECONDS + 30)) /nonexistent \
        "${snd[@]}" iperf3 -c "$WAN_RCV_ADDR" -p "$port" -t "$BENCH_IPERF_SECONDS" -J "$@"
    wait "$spid"
    local retrans fields
    retrans=$(tcp_retrans_pct "$counters_before" "$(tcp_counters)")
    fields=$(python3 - "$work/$tool.out" "$buffers" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    r = j["end"]["sum_received"]
    start = j["start"]
    print("bytes=%d seconds=%.3f" % (r["bytes"], r["seconds"]))
    print("note=%s; cc %s; socket buffers granted: snd %d rcv %d"
          % (sys.argv[2], j["end"].get("sender_tcp_congestion", "?"), start.get("sndbuf_actual", 0),
             start.get("rcvbuf_actual", 0)))
except (OSError, ValueError, KeyError) as e:
    print("bytes=0 seconds=0")
    print("error=no iperf3 result (%s)" % type(e).__name__)
PY
)
    local kv note
    kv=$(printf '%s\n' "$fields" | head -n 1)
    note=$(printf '%s\n' "$fields" | tail -n 1)
    emu_fields
    # shellcheck disable=SC2086 # kv is "bytes=N seconds=S"
    record kind=tool tool="$tool" label="$label" framing=tcp $kv capped=false verified=null \
        retrans_pct="$retrans" cpu_snd_s="$RUN_CPU" \
        cpu_rcv_s="$(time_field "$work/$tool.srv.time" 2)" "$note" "${EMU_FIELDS[@]}"
}

iperf3_window() { # 2 x BDP (at least 1 MiB), as far as the socket buffer maximum allows
    local bdp2 rmax wmax
    bdp2=$(awk -v r="$WAN_FWD_RATE_BPS" -v t="$WAN_RTT_US" \
        'BEGIN { w = 2 * r / 8 * t / 1e6; printf "%d", (w > 1048576 ? w : 1048576) }')
    rmax=$("${rcv[@]}" cat /proc/sys/net/core/rmem_max)
    wmax=$("${snd[@]}" cat /proc/sys/net/core/wmem_max)
    IPERF_WINDOW=$(printf '%s\n' "$bdp2" "$rmax" "$wmax" | sort -n | head -n 1)
    IPERF_WINDOW_WHY="2xBDP (>= 1 MiB) = $bdp2 B"
    [ "$IPERF_WINDOW" = "$bdp2" ] ||
        IPERF_WINDOW_WHY="$IPERF_WINDOW_WHY, capped by net.core.rmem_max $rmax / wmem_max $wmax"
}

# --- scp, sftp, rsync through a private sshd on the receiver host (lib.sh) -------
run_ssh_tool() { # tool label command...
    local tool=$1 label=$2
    shift 2
    local dst=$work/dst.$tool counters_before cpu_before
    mkdir -p "$dst"
    emu_before
    counters_before=$(tcp_counters)
    cpu_before=$(proc_cpu "$sshd_pid")
    run_capped "$tool" "$cap" "$dst" "${snd[@]}" "$@"
    # The server side of the session is counted once sshd has reaped it.
    for _ in $(seq 100); do
        [ -z "$(pgrep -P "$sshd_pid")" ] && break
        sleep 0.1
    done
    local cpu_rcv
    cpu_rcv=$(awk -v a="$cpu_before" -v b="$(proc_cpu "$sshd_pid")" 'BEGIN { printf "%.2f", b - a }')
    record_file_tool "$tool" "$label" tcp "$dst/$(basename "$src")" \
        "$(tcp_retrans_pct "$counters_before" "$(tcp_counters)")" "$cpu_rcv" \
        note="OpenSSH $(ssh -V 2>&1 | sed -n 's/^OpenSSH_\([^ ,]*\).*/\1/p'), default cipher"
    rm -rf "$dst"
}

# --- uftp: NAK-based UDP, unicast to the receiver ---------------------------------
run_uftp() {
    local dst=$work/dst.uftp uid=0x00a0f702 kbps buf
    mkdir -p "$dst"
    # uftp's 256 KiB default socket buffers overflow at link rate: give both
    # sides the largest the kernel grants without privilege.
    buf=$("${rcv[@]}" cat /proc/sys/net/core/rmem_max)
    kbps=$(awk -v r="$WAN_FWD_RATE_BPS" 'BEGIN { printf "%d", r * 0.95 * 1300 / 1352 / 1000 }')
    emu_before
    "${rcv[@]}" uftpd -d -U "$uid" -B "$buf" -D "$dst" >"$work/uftpd.out" 2>"$work/uftpd.err" &
    local dpid=$!
    wait_listening u 1044 "${rcv[@]}" || log "uftpd did not start: $(tail -n 2 "$work/uftpd.err")"
    # A closed group (-H) starts as soon as the receiver registers instead of
    # announcing for the open-group period.
    run_capped uftp "$cap" "$dst" "${snd[@]}" uftp -M "$WAN_RCV_ADDR" -H "$uid" -Y none \
        -R "$kbps" -b 1300 -B "$buf" "$src"
    local cpu_rcv
    cpu_rcv=$(proc_cpu "$dpid")
    kill -TERM "$dpid" 2>/dev/null
    wait "$dpid" 2>/dev/null
    record_file_tool uftp "uftp -R $kbps (kbit/s, fixed rate)" uftp "$dst/$(basename "$src")" \
        null "$cpu_rcv" note="socket buffers -B $buf"
    rm -rf "$dst"
}

# --- GridFTP: globus-url-copy with parallel TCP streams, unencrypted ------------
# An anonymous server (no security: clear-text FTP login, data unencrypted)
# of its own on the receiver host, started once; it writes as nobody, so the
# destination directory belongs to nobody and the work directory must be
# traversable.
GRIDFTP_PORT=2811
gridftp_pid='' gridftp_ready=unknown

# Globus looks its own host name up both ways, and the private hosts have no
# resolver: each side runs in a mount namespace of its own where /etc/hosts
# names the two addresses, with GLOBUS_HOSTNAME its own name. Sets
# GRIDFTP_ON, the command prefix for host wansnd or wanrcv.
gridftp_on() { # wansnd|wanrcv
    local -a host=("${snd[@]}")
    [ "$1" = wansnd ] || host=("${rcv[@]}")
    # shellcheck disable=SC2016 # expanded by that sh
    GRIDFTP_ON=(env GLOBUS_HOSTNAME="$1" "${host[@]}" unshare -m --
                sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$work/gridftp.hosts")
}

ensure_gridftp() {
    [ "$gridftp_ready" = unknown ] || { [ "$gridftp_ready" = yes ]; return; }
    gridftp_ready=no
    if ! command -v globus-gridftp-server >/dev/null || ! command -v globus-url-copy >/dev/null; then
        echo "not installed (bench/whole.sh --install-baselines)" >"$work/gridftp.log"
        return 1
    fi
    chmod 755 "$work"
    printf '127.0.0.1 localhost\n%s wansnd\n%s wanrcv\n' "$WAN_SND_ADDR" "$WAN_RCV_ADDR" \
        >"$work/gridftp.hosts"
    gridftp_on wanrcv
    "${GRIDFTP_ON[@]}" globus-gridftp-server -aa -anonymous-user nobody -anonymous-group nogroup \
        -p "$GRIDFTP_PORT" -control-interface "$WAN_RCV_ADDR" -data-interface "$WAN_RCV_ADDR" \
        -d error >"$work/gridftp.log" 2>&1 &
    gridftp_pid=$!
    wait_listening t "$GRIDFTP_PORT" "${rcv[@]}" || return 1
    gridftp_ready=yes
}

# shellcheck disable=SC2317 # reached through tools_teardown
gridftp_teardown() {
    [ -n "$gridftp_pid" ] || return 0
    kill -TERM "$gridftp_pid" 2>/dev/null
    wait "$gridftp_pid" 2>/dev/null
    gridftp_pid=''
}

# Each stream's socket buffer (-tcp-bs): its share of two bandwidth-delay
# products, at least 256 KiB, at most what net.core.{r,w}mem_max grant
# (globus-url-copy sets SO_SNDBUF/SO_RCVBUF, which turns autotuning off).
gridftp_tcp_bs() { # streams
    local want rmax wmax
    want=$(awk -v r="$WAN_FWD_RATE_BPS" -v t="$WAN_RTT_US" -v n="$1" \
        'BEGIN { w = 2 * r / 8 * t / 1e6 / n; printf "%d", (w > 262144 ? w : 262144) }')
    rmax=$("${rcv[@]}" cat /proc/sys/net/core/rmem_max)
    wmax=$("${snd[@]}" cat /proc/sys/net/core/wmem_max)
    printf '%s\n' "$want" "$rmax" "$wmax" | sort -n | head -n 1
}

run_gridftp() { # streams
    local n=$1 tool=gridftp-p$1 dst=$work/dst.gridftp bs counters_before cpu_before
    mkdir -p "$dst" && chown nobody:nogroup "$dst"
    bs=$(gridftp_tcp_bs "$n")
    emu_before
    counters_before=$(tcp_counters)
    cpu_before=$(proc_cpu "$gridftp_pid")
    gridftp_on wansnd
    run_capped "$tool" "$(whole_file_limit)" "$dst" "${GRIDFTP_ON[@]}" globus-url-copy -p "$n" -tcp-bs "$bs" \
        "file://$src" "ftp://$WAN_RCV_ADDR:$GRIDFTP_PORT$dst/"
    local cpu_rcv
    cpu_rcv=$(awk -v a="$cpu_before" -v b="$(proc_cpu "$gridftp_pid")" 'BEGIN { printf "%.2f", b - a }')
    record_file_tool "$tool" "GridFTP globus-url-copy -p $n" tcp "$dst/$(basename "$src")" \
        "$(tcp_retrans_pct "$counters_before" "$(tcp_counters)")" "$cpu_rcv" \
        note="-tcp-bs $bs; congestion control $("${snd[@]}" cat /proc/sys/net/ipv4/tcp_congestion_control); unencrypted"
    rm -rf "$dst"
}

# --- the runs, in the order asked -------------------------------------------------
ssh_ready=unknown
ensure_ssh() {
    [ "$ssh_ready" = unknown ] || { [ "$ssh_ready" = yes ]; return; }
    rm -rf "$work/ssh" # an earlier link's (bench/whole.sh runs several in one work directory)
    if ssh_setup "$work/ssh" "$WAN_RCV_ADDR" 22; then ssh_ready=yes; else ssh_ready=no; fi
    [ "$ssh_ready" = yes ]
}
# Every server a tool started on the receiver host; the caller's EXIT trap.
tools_teardown() {
    ssh_teardown
    gridftp_teardown
}

skip() { # tool reason
    log "$1 skipped: $2"
    record kind=tool tool="$1" label="$1" framing=tcp bytes=0 seconds=0 capped=false \
        verified=false error="not run: $2"
}

run_tool() { # tool: its record(s) appended to $BENCH_RESULTS
    case $1 in
    aftp) run_aftp aftp ;;
    aftp-repeat) run_aftp_repeat ;;
    aftp-fixed) run_aftp aftp-fixed --policy fixed ;;
    aftp-faux) run_aftp aftp-faux ;;
    iperf3)
        run_iperf3 iperf3 "iperf3 TCP, default buffers (memory)" "$(tcp_buffers_note)"
        iperf3_window
        run_iperf3 iperf3-w "iperf3 TCP -w $IPERF_WINDOW (memory)" "$IPERF_WINDOW_WHY" \
            -w "$IPERF_WINDOW"
        ;;
    scp) if ensure_ssh; then run_ssh_tool scp "scp (SFTP protocol)" \
            scp -q -F "$ssh_dir/ssh_config" "$src" "wanrcv:$work/dst.scp/"
        else skip scp "the private sshd did not start"; fi ;;
    sftp) if ensure_ssh; then
            echo "put $src $work/dst.sftp/$(basename "$src")" >"$work/sftp.batch"
            run_ssh_tool sftp "sftp" sftp -q -F "$ssh_dir/ssh_config" -b "$work/sftp.batch" wanrcv
        else skip sftp "the private sshd did not start"; fi ;;
    rsync) if ensure_ssh; then run_ssh_tool rsync "rsync over ssh" \
            rsync -e "ssh -F $ssh_dir/ssh_config" "$src" "wanrcv:$work/dst.rsync/"
        else skip rsync "the private sshd did not start"; fi ;;
    iperf3-bbr|iperf3-cubic)
        run_iperf3 "$1" "iperf3 TCP ${1#iperf3-} (memory)" "$(tcp_buffers_note)" -C "${1#iperf3-}" ;;
    uftp) run_uftp ;;
    gridftp-p*) if ensure_gridftp; then run_gridftp "${1#gridftp-p}"
        else skip "$1" "globus-gridftp-server did not start: $(tail -n 1 "$work/gridftp.log")"; fi ;;
    *) skip "$1" "unknown tool" ;;
    esac
}

# A tool during which the emulator was overloaded (other load on the machine)
# is measured again, up to BENCH_RETRIES times; only the last attempt stays.
rows_valid_since() { # line count: no record after that line was flagged by the emulator
    tail -n +"$(($1 + 1))" "$BENCH_RESULTS" | grep -q '"emu_valid": false' && return 1
    return 0
}

measure_tool() { # tool: run_tool, again while the emulator was overloaded
    local tool=$1 before
    for ((BENCH_ATTEMPT = 1; ; BENCH_ATTEMPT++)); do
        log "$tool over $WAN_PROFILE (attempt $BENCH_ATTEMPT) ..."
        before=$(wc -l <"$BENCH_RESULTS")
        run_tool "$tool"
        rows_valid_since "$before" && break
        [ "$BENCH_ATTEMPT" -le "$BENCH_RETRIES" ] || break
        log "$tool: the emulator was overloaded meanwhile: measuring again"
        head -n "$before" "$BENCH_RESULTS" >"$BENCH_RESULTS.tmp"
        mv "$BENCH_RESULTS.tmp" "$BENCH_RESULTS"
    done
}
