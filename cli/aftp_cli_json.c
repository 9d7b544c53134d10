/* aftp send --json and aftp recv --json: one JSON object per line on
 * stdout (NDJSON), rendered from the client API's progress and file
 * events and the server API's log, progress and receipt callbacks. The
 * schema, version 1, is cli/JSON.md; fields are only ever added. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "aftp/aftp_server.h"
#include "aftp/aftp_version.h"
#include "aftp_cli_base.h"

/* The length of the valid UTF-8 sequence at s, 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *s)
{
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
        (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
        return 0; /* overlong, a surrogate, or beyond U+10FFFF */
    return n;
}

/* A JSON string. Names and messages can hold any byte: control characters
 * are escaped, and a byte that is not valid UTF-8 becomes U+FFFD, so every
 * line parses. */
static void put_string(FILE *out, const char *text)
{
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    fputc('"', out);
    while (*s) {
        size_t n;
        if (*s == '"' || *s == '\\') {
            fprintf(out, "\\%c", *s++);
        } else if (*s < 0x20 || *s == 0x7f) {
            fprintf(out, "\\u%04x", *s++);
        } else if (*s < 0x80) {
            fputc(*s++, out);
        } else if ((n = utf8_sequence(s)) != 0) {
            fwrite(s, 1, n, out);
            s += n;
        } else {
            fputs("\\ufffd", out);
            s++;
        }
    }
    fputc('"', out);
}

/* A number; JSON has no NaN or infinity: those are null. */
static void put_number(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, "%.15g", v);
    else
        fputs("null", out);
}

static void put_key(FILE *out, const char *key)
{
    fprintf(out, ",\"%s\":", key);
}

static void put_field_string(FILE *out, const char *key, const char *value)
{
    put_key(out, key);
    put_string(out, value);
}

static void put_field_u64(FILE *out, const char *key, uint64_t value)
{
    put_key(out, key);
    fprintf(out, "%llu", (unsigned long long)value);
}

static void put_field_int(FILE *out, const char *key, long long value)
{
    put_key(out, key);
    fprintf(out, "%lld", value);
}

static void put_field_number(FILE *out, const char *key, double value)
{
    put_key(out, key);
    put_number(out, value);
}

/* A string, or null when there is none. */
static void put_field_string_or_null(FILE *out, const char *key, const char *value)
{
    put_key(out, key);
    if (value != NULL)
        put_string(out, value);
    else
        fputs("null", out);
}

/* Every object: its schema version, its type, and when it was written. */
static void begin(FILE *out, const char *type)
{
    char stamp[AFTP_CLI_TIME_MAX];
    aftp_cli_format_time(stamp, sizeof stamp);
    fprintf(out, "{\"v\":%d,\"type\":\"%s\",\"time\":\"%s\"", AFTP_CLI_JSON_VERSION, type,
            stamp);
}

/* Ends the line and hands it over at once: a reader follows as it comes. */
static void end(FILE *out)
{
    fputs("}\n", out);
    fflush(out);
}

const char *aftp_cli_cipher_name(int cipher)
{
    switch (cipher) {
    case AFTP_CIPHER_AES256GCM: return "aes-256-gcm";
    case AFTP_CIPHER_CHACHA20POLY1305: return "chacha20-poly1305";
    default: return "unencrypted";
    }
}

void aftp_cli_json_start(FILE *out, const char *program, const char *const *sources,
                         size_t count, const char *peer)
{
    begin(out, "start");
    put_field_string(out, "program", program);
    put_field_string(out, "version", aftp_version_string());
    put_field_string(out, "peer", peer);
    put_key(out, "files");
    for (size_t i = 0; i < count; i++) {
        fputc(i ? ',' : '[', out);
        put_string(out, sources[i]);
    }
    fputs(count ? "]" : "[]", out);
    end(out);
}

void aftp_cli_json_progress(FILE *out, size_t index, const aftp_progress *p)
{
    begin(out, "progress");
    put_field_int(out, "index", (long long)index);
    put_field_string(out, "name", p->name);
    put_field_u64(out, "size", p->size);
    put_field_u64(out, "bytes_done", p->bytes_done);
    put_field_number(out, "seconds", p->seconds);
    put_field_number(out, "goodput_bps", p->goodput_bps);
    put_field_number(out, "eta_seconds", p->eta_seconds >= 0 ? p->eta_seconds : NAN);
    put_field_u64(out, "rate_bps", p->rate_bps);
    put_field_number(out, "loss", p->loss);
    put_field_number(out, "rtt_ms", p->rtt_ms);
    put_field_number(out, "min_rtt_ms", p->min_rtt_ms);
    put_field_number(out, "queue_ms", p->queue_ms);
    end(out);
}

static void put_digest(FILE *out, const uint8_t *digest)
{
    put_key(out, "digest");
    fputc('"', out);
    for (int i = 0; i < AFTP_DIGEST_LEN; i++)
        fprintf(out, "%02x", digest[i]);
    fputc('"', out);
}

/* STARTED: "file_start"; FINISHED: "done". A FAILED file is the "error"
 * object's, which the exit status joins. */
void aftp_cli_json_file(FILE *out, const aftp_file_event *ev)
{
    if (ev->type == AFTP_FILE_FAILED)
        return;
    begin(out, ev->type == AFTP_FILE_STARTED ? "file_start" : "done");
    put_field_int(out, "index", (long long)ev->index);
    put_field_string(out, "source", ev->source);
    put_field_string(out, "name", ev->name);
    put_field_u64(out, "size", ev->size);
    if (ev->type == AFTP_FILE_FINISHED) {
        put_field_u64(out, "bytes", ev->bytes);
        put_field_number(out, "seconds", ev->seconds);
        put_field_number(out, "goodput_bps",
                         ev->seconds > 0 ? (double)ev->bytes * 8 / ev->seconds : 0);
        put_field_string(out, "digest_algorithm", "xxh3-128");
        put_digest(out, ev->digest);
        put_field_number(out, "retransmitted", ev->retransmitted);
        put_field_string(out, "cipher", aftp_cli_cipher_name(ev->cipher));
        put_field_u64(out, "rate_cap_bps", ev->rate_cap_bps);
    }
    end(out);
}

static const char *kind_name(int kind)
{
    return kind == AFTP_ENTRY_DIR ? "dir" : kind == AFTP_ENTRY_SYMLINK ? "symlink" : "file";
}

/* What became of an entry: a directory or link placed counts as sent. */
static const char *result_name(const aftp_file_event *ev)
{
    switch (ev->type) {
    case AFTP_FILE_SKIPPED: return "skipped";
    case AFTP_FILE_FAILED: return "failed";
    default: return ev->resumed_bytes ? "resumed" : "sent";
    }
}

void aftp_cli_json_entry(FILE *out, const aftp_file_event *ev)
{
    if (ev->type == AFTP_FILE_STARTED)
        return;
    int sent = ev->type == AFTP_FILE_FINISHED && ev->kind == AFTP_ENTRY_FILE;
    begin(out, "file");
    put_field_string(out, "result", result_name(ev));
    put_field_string(out, "kind", kind_name(ev->kind));
    put_field_int(out, "index", (long long)ev->index);
    put_field_string(out, "source", ev->source);
    put_field_string(out, "path", ev->path);
    put_field_string(out, "name", ev->printable_name);
    put_field_u64(out, "size", ev->size);
    put_field_u64(out, "bytes", sent ? ev->size - ev->resumed_bytes : 0);
    put_field_u64(out, "resumed_bytes", ev->resumed_bytes);
    put_field_number(out, "seconds", ev->seconds);
    if (sent)
        put_digest(out, ev->digest);
    if (ev->type == AFTP_FILE_FAILED) {
        put_field_int(out, "error", ev->error);
        put_field_string_or_null(out, "error_name", aftp_error_name(ev->error));
        put_field_string(out, "message", ev->message);
    }
    end(out);
}

/* "code" and its stable "name" (null for a code this aftp does not know). */
static void put_error_code(FILE *out, int error)
{
    put_field_int(out, "code", error);
    put_field_string_or_null(out, "name", aftp_error_name(error));
}

void aftp_cli_json_error(FILE *out, int error, const char *message, int exit_status)
{
    begin(out, "error");
    put_error_code(out, error);
    put_field_string(out, "message", message);
    put_field_int(out, "exit", exit_status);
    end(out);
}

/* ---- aftp recv ---- */

void aftp_cli_json_recv_start(FILE *out, const char *listen, const char *server_key,
                              const char *fingerprint)
{
    begin(out, "start");
    put_field_string(out, "program", "aftp recv");
    put_field_string(out, "version", aftp_version_string());
    put_field_string(out, "listen", listen);
    put_field_string_or_null(out, "server_key", server_key);
    put_field_string_or_null(out, "fingerprint", fingerprint);
    end(out);
}

/* Seconds between two wall-clock instants, 0 when they are not in order. */
static double seconds_between(int64_t from_ns, int64_t to_ns)
{
    return to_ns > from_ns ? (double)(to_ns - from_ns) / 1e9 : 0;
}

/* The client of a receipt or an entry report. */
static void put_recv_client(FILE *out, const aftp_cli_json_recv_file *f)
{
    put_field_string(out, "client", f->client_address);
    put_field_string_or_null(out, "client_key", f->client_key);
    put_field_string(out, "client_comment", f->receipt->client->comment);
}

/* enum aftp_receipt_outcome and enum aftp_entry_kind as JSON says them. */
static const char *outcome_name(int outcome)
{
    static const char *const names[] = {"?", "sent", "resumed", "skipped", "placed"};
    return outcome >= AFTP_OUTCOME_SENT && outcome <= AFTP_OUTCOME_PLACED ? names[outcome] : "?";
}

void aftp_cli_json_receipt(FILE *out, const aftp_cli_json_recv_file *f)
{
    const aftp_receipt *r = f->receipt;
    double seconds = seconds_between(r->start_unix_ns, r->end_unix_ns);
    begin(out, "done");
    put_field_int(out, "index", (long long)f->index);
    put_field_string(out, "name", r->printable_path);
    put_field_string(out, "path", r->path);
    put_field_string(out, "root", r->root);
    put_field_u64(out, "size", r->size);
    put_field_u64(out, "bytes", r->size);
    put_field_number(out, "seconds", seconds);
    put_field_number(out, "session_seconds",
                     seconds_between(r->connected_unix_ns, r->end_unix_ns));
    put_field_number(out, "goodput_bps", seconds > 0 ? (double)r->size * 8 / seconds : 0);
    put_field_string(out, "digest_algorithm", "xxh3-128");
    put_digest(out, r->digest);
    put_field_number(out, "duplicate", f->duplicate);
    put_field_string(out, "cipher", aftp_cli_cipher_name(r->cipher));
    put_field_u64(out, "rate_cap_bps", r->rate_cap_bps);
    put_recv_client(out, f);
    put_field_string(out, "kind", kind_name(r->kind));
    put_field_string(out, "outcome", outcome_name(r->outcome));
    put_field_u64(out, "held_bytes", r->held_bytes);
    end(out);
}

void aftp_cli_json_recv_entry(FILE *out, const aftp_cli_json_recv_file *f)
{
    const aftp_receipt *r = f->receipt;
    begin(out, "entry");
    put_field_string(out, "name", r->printable_path);
    put_field_string(out, "path", r->path);
    put_field_string(out, "root", r->root);
    put_field_string(out, "kind", kind_name(r->kind));
    put_field_string(out, "outcome", outcome_name(r->outcome));
    put_field_u64(out, "size", r->size);
    put_field_string_or_null(out, "target", r->target);
    put_recv_client(out, f);
    end(out);
}

void aftp_cli_json_session_error(FILE *out, int error, const char *message)
{
    begin(out, "session_error");
    put_error_code(out, error);
    put_field_string(out, "message", message);
    end(out);
}

void aftp_cli_json_notice(FILE *out, const char *kind, const char *message)
{
    begin(out, "notice");
    put_field_string(out, "kind", kind);
    put_field_string(out, "message", message);
    end(out);
}

/* The send's figures (aftp_client_summary), in the summary object. */
static void put_send_summary(FILE *out, const aftp_client_summary *s)
{
    put_field_u64(out, "entries", s->entries);
    put_field_u64(out, "sent", s->files_sent);
    put_field_u64(out, "resumed", s->files_resumed);
    put_field_u64(out, "skipped", s->files_skipped);
    put_field_u64(out, "failed", s->failed);
    put_field_u64(out, "dirs", s->dirs);
    put_field_u64(out, "links", s->links);
    put_field_u64(out, "skipped_locally", s->skipped_locally);
    put_field_u64(out, "file_bytes", s->file_bytes);
    put_field_u64(out, "bytes_sent", s->bytes_sent);
    put_field_u64(out, "resumed_bytes", s->bytes_resumed);
    put_field_u64(out, "skipped_bytes", s->bytes_skipped);
    put_field_number(out, "send_seconds", s->seconds);
    put_field_number(out, "retransmitted", s->retransmitted);
}

void aftp_cli_json_summary(FILE *out, int exit_status, size_t files, size_t delivered,
                           uint64_t bytes, double seconds, const aftp_client_summary *send)
{
    begin(out, "summary");
    put_key(out, "ok");
    fputs(exit_status == AFTP_EXIT_OK ? "true" : "false", out);
    put_field_int(out, "exit", exit_status);
    put_field_u64(out, "files", files);
    put_field_u64(out, "delivered", delivered);
    put_field_u64(out, "bytes", bytes);
    put_field_number(out, "seconds", seconds);
    if (send != NULL)
        put_send_summary(out, send);
    end(out);
}

/* The code of a failure the library did not report (the command line, key
 * files, the progress log): the representative of its exit status's class. */
int aftp_cli_error_of_exit(int exit_status)
{
    static const int representative[] = {
        [AFTP_EXIT_OK] = AFTP_OK,
        [AFTP_EXIT_FAILED] = AFTP_ERR_INTERNAL,
        [AFTP_EXIT_USAGE] = AFTP_ERR_INVALID_ARGUMENT,
        [AFTP_EXIT_LOCAL_FILE] = AFTP_ERR_IO,
        [AFTP_EXIT_NETWORK] = AFTP_ERR_NETWORK,
        [AFTP_EXIT_REFUSED] = AFTP_ERR_PEER_REFUSED,
        [AFTP_EXIT_VERIFY] = AFTP_ERR_DIGEST_MISMATCH,
        [AFTP_EXIT_CANCELLED] = AFTP_ERR_CANCELLED,
        [AFTP_EXIT_AUTH] = AFTP_ERR_AUTH};
    if (exit_status < 0 || exit_status >= (int)(sizeof representative / sizeof representative[0]))
        return AFTP_ERR_INTERNAL;
    return representative[exit_status];
}
