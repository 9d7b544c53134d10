# Sourced by the scripts: installs what aftp needs to build, test and demo
# on Debian 12 (apt-get, as root). Packages already present are not fetched again.
aftp_packages=(build-essential cmake pkg-config clang libsodium-dev libssl-dev libuv1-dev libxxhash-dev
               libcmocka-dev iproute2 python3 python3-cryptography
               libclang-rt-14-dev # libFuzzer and the sanitizers' runtimes for clang: only a Recommends of clang's
                                  # own packages, which --no-install-recommends leaves out
               iputils-ping procps util-linux # netem: ping, sysctl, nsenter/unshare/setpriv
               iperf3 time) # bench/loopback.sh: iperf3 baselines, GNU time for CPU and RSS

aftp_install_deps() {
    local missing=()
    for p in "${aftp_packages[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
        return 1
    fi
    echo "=== installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
