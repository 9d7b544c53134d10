#include <stdio.h>
#include <string.h>

#include "aftp/aftp_error.h"
#include "aftp/aftp_global.h"
#include "aftp/aftp_version.h"
#include "aftp_cli_base.h"

void aftp_cli_usage(FILE *to)
{
    fputs("usage: aftp send [--rate RATE] [--policy POLICY] [OPTIONS] SRC... HOST:PORT\n"
          "       aftp get [OPTIONS] HOST:PORT:PATH... DEST\n"
          "       aftp recv --listen [ADDR:]PORT --dir DIR [--once] [--overwrite] [OPTIONS]\n"
          "       aftp serve --listen [ADDR:]PORT --dir DIR [OPTIONS]\n"
          "       aftp keygen [-f FILE] [-C COMMENT]\n"
          "       aftp --help | --version\n"
          "\n"
          "Fast, verified, encrypted file transfer over UDP (push: 'send' delivers FILE\n"
          "to a running 'recv', which writes it into DIR under the same base name).\n"
          "Testing the network without disks: FILE faux:///NAME?SIZE sends SIZE zero\n"
          "bytes (suffixes k M G T, binary) as NAME; DIR faux:// keeps nothing, and\n"
          "checks that what it receives is such zeros.\n"
          "\n"
          "send:\n"
          "  -r, --rate RATE            target rate in bits/s, suffixes k M G T\n"
          "                             (e.g. 500M, 2.5g): policy fixed sends at it\n"
          "                             (default 1G), the others never exceed it\n"
          "      --policy POLICY        fair (default: fill the path, share it),\n"
          "                             high (about twice a fair share), low (yield\n"
          "                             to other traffic) or fixed (hold --rate)\n"
          "      --max-rate RATE        never send faster, whatever the policy\n"
          "      --min-rate RATE        never slow down below this, even when congested\n"
          "      --progress-log FILE    write a tab-separated line per quarter second:\n"
          "                             seconds, bytes sent, goodput, pacing rate (bit/s),\n"
          "                             loss (ppm), min RTT and queueing delay (us)\n"
          "      SRC...                 files and directories (recursive; 'd' arrives as\n"
          "                             d/..., 'd/' puts d's contents beneath DIR)\n"
          "      --checksum             skip a file already there by content, not by\n"
          "                             size and modification time (the default)\n"
          "      --ignore-times         send every file (one already there is refused\n"
          "                             unless the receiver allows overwriting)\n"
          "      --no-resume            send interrupted files again from their start\n"
          "      --links                recreate symbolic links inside a tree as links\n"
          "                             (default: skipped with a notice)\n"
          "      --no-path-memory       start afresh, not at the rate this path had in\n"
          "                             the last hour (~/.cache/aftp/paths)\n"
          "      --no-early-entries     offer no file (get: no path) in the handshake (names\n"
          "                             then never travel under the server's static key\n"
          "                             alone; costs one round trip)\n"

          "      --peer-key FILE        the receiver's public key (else its HOST:PORT line\n"
          "                             in the known hosts)\n"
          "      --known-hosts FILE     pinned receiver keys, lines 'HOST:PORT aftp-x25519\n"
          "                             <base64>' (default ~/.aftp/known_hosts); from a\n"
          "                             terminal, an unknown receiver's key is shown with\n"
          "                             its fingerprint and added when you answer yes\n"
          "get (fetch PATHs from a server's root for this key into the directory DEST;\n"
          "     'dir' arrives as DEST/dir, 'dir/' its contents; the options of send that\n"
          "     apply: keys, --max-rate (the server sends no faster), --checksum,\n"
          "     --ignore-times, --no-resume, --json, --progress-log, --mtu,\n"
          "     --idle-timeout; a file already in DEST is skipped when identical)\n"
          "      --overwrite            replace a file in DEST that differs from the\n"
          "                             server's (default: that file fails, exit 5)\n"
          "recv:\n"
          "  -l, --listen [ADDR:]PORT   where to listen (default ADDR 0.0.0.0,\n"
          "                             [::]:PORT for IPv6, PORT 0 picks a free port)\n"
          "  -d, --dir DIR              destination directory (faux://: none)\n"
          "      --once                 exit after one transfer, with its result\n"
          "      --overwrite            replace files that already exist\n"
          "      --no-links             refuse the symbolic links a client sends in a\n"
          "                             tree (default: recreated, targets literal)\n"
          "      --mode-mask OCTAL      permission bits kept of what a client sends\n"
          "                             (default 777: setuid, setgid, sticky dropped)\n"
          "      --partial-max-age DURATION\n"
          "                             remove unfinished files no sender came back for\n"
          "                             after this long: 7d (default), 12h, 30m, 90s\n"
          "      --authorized-keys FILE the clients' public keys, one line each (default\n"
          "                             ~/.aftp/authorized_keys)\n"
          "  -r, --rate RATE            cap the server's total rate (all sessions, in\n"
          "                             and out) in bits/s, suffixes k M G T; shared\n"
          "                             fairly between the sessions\n"
          "serve (the same server as recv without --once):\n"
          "                             stderr's lines begin with the UTC time; SIGHUP\n"
          "                             reads the authorized keys again (new sessions\n"
          "                             use them); SIGTERM admits no new session, lets\n"
          "                             those running finish (up to 30 s), exits 0\n"
          "both:\n"
          "      --identity FILE        own private key (default ~/.aftp/id_x25519,\n"
          "                             made by 'aftp keygen')\n"
          "      --psk-file FILE        a pre-shared key both sides must hold, in addition\n"
          "                             to the keys ('aftp keygen -f FILE' makes one)\n"
          "      --cipher CIPHER        auto (default: AES-256-GCM with AES-NI, else\n"
          "                             ChaCha20-Poly1305), aes, chacha, or none (no\n"
          "                             encryption: both sides must say so)\n"
          "  -t, --idle-timeout SECONDS give up after this much silence (default 30)\n"
          "      --mtu BYTES            largest IP packet the path carries: datagrams\n"
          "                             are BYTES - 48 (send: default 1500, 9000 for\n"
          "                             jumbo frames; recv: accepts up to 9216 by\n"
          "                             default; the smaller of the two is used)\n"
          "  -q, --quiet                no progress line, notices or warnings\n"
          "      --json                 stdout: one JSON object per line (start,\n"
          "                             progress, done with the digest, error with its\n"
          "                             code, summary) instead of the summary lines;\n"
          "                             the schema is cli/JSON.md\n"
          "  -h, --help                 this text (aftp -V, --version: the version)\n"
          "\n"
          "A summary line goes to stdout when a file is delivered and verified\n"
          "(XXH3-128). Exit status: 0 ok, 1 transfer failed, 2 usage, 3 local file\n"
          "error, 4 network/peer unreachable or silent, 5 refused by the receiver,\n"
          "6 verification failed, 7 cancelled, 8 authentication (keys).\n",
          to);
}

int main(int argc, char **argv)
{
    /* The tool owns its process: it keeps key schedules in guarded memory
     * and survives a source truncated under it. Only an OpenSSL that
     * allocated before main (INVALID_STATE) denies the first, and aftp
     * works without it. */
    int rc = aftp_global_init(AFTP_INIT_GUARD_KEYS | AFTP_INIT_GUARD_SOURCE);
    if (rc != AFTP_OK && rc != AFTP_ERR_INVALID_STATE) {
        aftp_cli_error("cannot set up the guards of key memory and source files: %s",
                       aftp_strerror(rc));
        return AFTP_EXIT_FAILED;
    }
    if (argc < 2) {
        aftp_cli_usage(stderr);
        return AFTP_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "send") == 0)
        return aftp_cli_send(argc - 1, argv + 1);
    if (strcmp(cmd, "get") == 0)
        return aftp_cli_get(argc - 1, argv + 1);
    if (strcmp(cmd, "recv") == 0)
        return aftp_cli_recv(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0)
        return aftp_cli_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "keygen") == 0)
        return aftp_cli_keygen(argc - 1, argv + 1);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        aftp_cli_usage(stdout);
        return AFTP_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("aftp %s (protocol version 1)\n", aftp_version_string());
        return AFTP_EXIT_OK;
    }
    aftp_cli_error("unknown command '%s' (aftp --help)", cmd);
    return AFTP_EXIT_USAGE;
}
