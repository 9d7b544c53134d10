/*
 * aftp wire format: every constant, limit and packet layout of
 * spec/aftp-protocol.md, and the encoders/decoders for them.
 *
 * Pure code: no I/O, no clock, no allocation. Integers are big-endian
 * (network byte order) and read/written byte by byte; no struct is ever
 * cast over a buffer.
 *
 * Ownership: encoders write into a caller-owned buffer and never keep a
 * pointer to it. Decoders never copy variable-length data: pointers in a
 * decoded packet (payload, path, reason, ranges, extensions) borrow from the
 * input buffer and are valid only while it is. A failed decode leaves the
 * output struct untouched.
 */
#ifndef AFTP_WIRE_H
#define AFTP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "aftp/aftp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions (spec section 12) ---- */
#define AFTP_WIRE_VERSION 1u              /* the version this code speaks */
#define AFTP_WIRE_VERSION_NEGOTIATION 0u  /* header version of a VERSION_NEG packet */

/* ---- common header (spec section 5) ----
 *  0      1      2      4              8                       16
 *  +------+------+------+--------------+-----------------------+
 *  | ver  | type | flags| connection id|     packet number     |
 *  +------+------+------+--------------+-----------------------+
 */
#define AFTP_WIRE_HEADER_LEN 16u
#define AFTP_WIRE_TAG_LEN 16u       /* AEAD tag appended to protected packets */

/* Header flags. Bits not defined here are reserved: sent as zero, ignored. */
#define AFTP_WIRE_FLAG_PROTECTED 0x0001u  /* body sealed with AEAD, tag follows */
#define AFTP_WIRE_FLAG_KEY_PHASE 0x0002u  /* which key generation sealed it */
#define AFTP_WIRE_FLAGS_DEFINED (AFTP_WIRE_FLAG_PROTECTED | AFTP_WIRE_FLAG_KEY_PHASE)

/* ---- packet types (spec section 6) ---- */
enum aftp_wire_type {
    AFTP_WIRE_VERSION_NEG = 0x00,
    AFTP_WIRE_HELLO = 0x01,
    AFTP_WIRE_HELLO_ACK = 0x02,
    AFTP_WIRE_FILE_OFFER = 0x03,
    AFTP_WIRE_FILE_REPLY = 0x04,
    AFTP_WIRE_DATA = 0x05,
    AFTP_WIRE_FEEDBACK = 0x06,
    AFTP_WIRE_FILE_DONE = 0x07,
    AFTP_WIRE_FILE_RESULT = 0x08,
    AFTP_WIRE_CLOSE = 0x09,
    AFTP_WIRE_RETRY = 0x0A,     /* stateless: server asks for a HELLO with its cookie */
    AFTP_WIRE_SERVER_KEY = 0x0B, /* stateless: server's static public key (KEY_REQUEST) */
    AFTP_WIRE_ENTRIES = 0x0C,   /* pipelined mode: a batch of entries (sender) */
    AFTP_WIRE_VERDICTS = 0x0D,  /* pipelined mode: a batch of verdicts (receiver) */
    AFTP_WIRE_ABANDON = 0x0E,   /* pipelined mode: the sender gives up one FILE entry */
    AFTP_WIRE_PULL_REQUEST = 0x0F, /* pull: the client names the paths it wants */
    AFTP_WIRE_PULL_REPLY = 0x10,   /* pull: the server's verdict on each path */
    AFTP_WIRE_RATE_UPDATE = 0x11,  /* push, RATE_CAP announced: the server's new cap */
    AFTP_WIRE_PULL_END = 0x12      /* pull, PULL_END negotiated: no entry follows */
};
#define AFTP_WIRE_TYPE_MAX AFTP_WIRE_PULL_END

/* ---- roles and ciphers (spec sections 6.2, 12) ---- */
enum aftp_wire_role {
    AFTP_WIRE_ROLE_PUSH = 1, /* the client sends files to the server */
    AFTP_WIRE_ROLE_PULL = 2  /* the client receives files from the server */
};

enum aftp_wire_cipher {
    AFTP_WIRE_CIPHER_NONE = 0,
    AFTP_WIRE_CIPHER_AES256GCM = 1,
    AFTP_WIRE_CIPHER_CHACHA20POLY1305 = 2
};
#define AFTP_WIRE_CIPHER_MAX AFTP_WIRE_CIPHER_CHACHA20POLY1305

/* ---- wire error codes carried in FILE_REPLY, FILE_RESULT, CLOSE (spec section 11) ---- */
enum aftp_wire_error {
    AFTP_WIRE_ERR_NONE = 0,
    AFTP_WIRE_ERR_PROTOCOL = 1,
    AFTP_WIRE_ERR_VERSION = 2,
    AFTP_WIRE_ERR_FILE_EXISTS = 3,
    AFTP_WIRE_ERR_NO_SPACE = 4,
    AFTP_WIRE_ERR_IO = 5,
    AFTP_WIRE_ERR_DIGEST_MISMATCH = 6,
    AFTP_WIRE_ERR_PATH_REJECTED = 7,
    AFTP_WIRE_ERR_IDLE_TIMEOUT = 8,
    AFTP_WIRE_ERR_CANCELLED = 9,
    AFTP_WIRE_ERR_INTERNAL = 10,
    AFTP_WIRE_ERR_SOURCE_CHANGED = 11,
    AFTP_WIRE_ERR_PERMISSION = 12,
    AFTP_WIRE_ERR_LIMIT = 13,
    AFTP_WIRE_ERR_UNAUTHORIZED = 14, /* the client's key is not admitted */
    AFTP_WIRE_ERR_NOT_FOUND = 15     /* PULL_REPLY: no such path beneath the client's root */
};

/* ---- limits (spec section 4 and per packet) ---- */
#define AFTP_WIRE_MAX_DATAGRAM 65507u        /* largest UDP payload over IPv4 */
#define AFTP_WIRE_MIN_DATAGRAM 1200u         /* every path must carry this */
#define AFTP_WIRE_HELLO_MIN_LEN 1200u        /* HELLO is padded to this (anti-amplification) */
#define AFTP_WIRE_MIN_BLOCK 64u
#define AFTP_WIRE_MAX_BLOCK (AFTP_WIRE_MAX_DATAGRAM - AFTP_WIRE_DATA_OVERHEAD)
#define AFTP_WIRE_MAX_FILE_SIZE (UINT64_C(1) << 62)
/* No block index, range end or block count may exceed this, so index
 * arithmetic (end + 1, index * block size) can never overflow. */
#define AFTP_WIRE_MAX_BLOCKS (AFTP_WIRE_MAX_FILE_SIZE / AFTP_WIRE_MIN_BLOCK)
#define AFTP_WIRE_MAX_PATH 4096u             /* bytes of a FILE_OFFER path */
#define AFTP_WIRE_MAX_REASON 512u            /* bytes of a CLOSE reason */
#define AFTP_WIRE_MAX_CIPHERS 8u
#define AFTP_WIRE_MAX_VERSIONS 32u
#define AFTP_WIRE_MAX_RANGES 8192u           /* missing ranges in one FEEDBACK */
#define AFTP_WIRE_DIGEST_LEN 16u             /* XXH3-128, canonical (big-endian) */
#define AFTP_WIRE_VARINT_MAX ((UINT64_C(1) << 62) - 1)
#define AFTP_WIRE_MAX_TOKEN 64u              /* bytes of a RETRY token / COOKIE value */
#define AFTP_WIRE_SERVER_KEY_LEN 32u         /* X25519 public key in SERVER_KEY */

/* ---- extension TLV types (spec section 12.3) ---- */
#define AFTP_WIRE_EXT_HANDSHAKE 0x0001u /* HELLO: Noise message 1; HELLO_ACK: message 2 */
#define AFTP_WIRE_EXT_COOKIE 0x0002u    /* HELLO: the token of the server's RETRY */
#define AFTP_WIRE_EXT_KEY_REQUEST 0x0003u /* HELLO (empty value): answer with SERVER_KEY */
/* HELLO (empty value): the client can honour a rate cap; HELLO_ACK (u64):
 * the cap, bits of UDP payload per second, that the sender must obey. */
#define AFTP_WIRE_EXT_RATE_CAP 0x0004u
#define AFTP_WIRE_RATE_CAP_LEN 8u       /* a HELLO_ACK's RATE_CAP value */
/* HELLO and HELLO_ACK (u32 window W): pipelined mode (spec section 12.3.2). */
#define AFTP_WIRE_EXT_PIPELINE 0x0005u
#define AFTP_WIRE_PIPELINE_LEN 4u
#define AFTP_WIRE_MAX_WINDOW 65536u     /* largest entry window W */
/* HELLO and HELLO_ACK (empty value): the client pulls, the server serves
 * the pull (spec section 12.3.3); enables PULL_REQUEST and PULL_REPLY. */
#define AFTP_WIRE_EXT_PULL 0x0006u
/* HELLO and HELLO_ACK (empty value): message 1's application payload holds
 * the session's first entries (a push) or its request (a pull), and the
 * server took them (spec 12.3.4). */
#define AFTP_WIRE_EXT_EARLY_ENTRIES 0x0007u
/* HELLO and HELLO_ACK (empty value), pull only: the client can take, and
 * the server sends, PULL_END (spec 12.3.5). */
#define AFTP_WIRE_EXT_PULL_END 0x0008u

/* ---- pull (spec sections 6.16, 6.17, 9.15) ---- */
#define AFTP_WIRE_MAX_PULL_PATHS 64u    /* paths in one PULL_REQUEST */
#define AFTP_WIRE_PULL_REQUEST_FIXED 12u /* flags, max_rate, path count */
#define AFTP_WIRE_PULL_REPLY_FIXED 2u   /* the count before the errors */

/* ---- pipelined mode (spec sections 6.13, 6.14, 9.14) ---- */
#define AFTP_WIRE_MAX_ENTRIES 1024u     /* entry records in one ENTRIES */
#define AFTP_WIRE_MAX_VERDICTS 1024u    /* verdict records in one VERDICTS */
#define AFTP_WIRE_ENTRY_FIXED 67u
#define AFTP_WIRE_MAX_HOLES 1024u       /* hole ranges of one entry (flag HOLES) */
#define AFTP_WIRE_VERDICT_FIXED 9u
#define AFTP_WIRE_BATCH_FIXED 2u        /* the record count before the records */

/* Fixed body sizes (bytes after the common header). */
#define AFTP_WIRE_DATA_FIXED 12u             /* file id + block index */
#define AFTP_WIRE_DATA_OVERHEAD (AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED + AFTP_WIRE_TAG_LEN)
#define AFTP_WIRE_FEEDBACK_FIXED 66u
#define AFTP_WIRE_FILE_OFFER_FIXED 32u
#define AFTP_WIRE_FILE_REPLY_LEN 6u
#define AFTP_WIRE_FILE_DONE_LEN 28u
#define AFTP_WIRE_FILE_RESULT_LEN 22u
#define AFTP_WIRE_ABANDON_LEN 6u
#define AFTP_WIRE_RATE_UPDATE_LEN 16u
#define AFTP_WIRE_PULL_END_LEN 4u
#define AFTP_WIRE_CLOSE_FIXED 4u

/* Default block size: the largest payload that fits a 1500-byte IPv6 path
 * (1452-byte UDP payload) with a tag, so one size serves both families. */
#define AFTP_WIRE_DEFAULT_BLOCK (1452u - AFTP_WIRE_DATA_OVERHEAD)

/* ---- decoded / to-be-encoded packets ---- */
typedef struct aftp_wire_header {
    uint8_t version;
    uint8_t type;
    uint16_t flags;
    uint32_t conn_id;   /* the receiving endpoint's id; in HELLO the client's own */
    uint64_t pn;        /* packet number, never reused within a session */
} aftp_wire_header;

typedef struct aftp_wire_version_neg {
    uint8_t count;
    uint8_t versions[AFTP_WIRE_MAX_VERSIONS];
} aftp_wire_version_neg;

typedef struct aftp_wire_hello {
    uint8_t role;                      /* enum aftp_wire_role */
    uint8_t cipher_count;
    uint8_t ciphers[AFTP_WIRE_MAX_CIPHERS]; /* in preference order */
    uint16_t max_datagram;             /* largest datagram the client accepts */
    uint16_t ext_len;
    const uint8_t *ext;                /* extension TLVs, borrowed */
} aftp_wire_hello;

typedef struct aftp_wire_hello_ack {
    uint32_t server_conn_id;
    uint8_t cipher;
    uint16_t max_datagram;
    uint16_t ext_len;
    const uint8_t *ext;
} aftp_wire_hello_ack;

#define AFTP_WIRE_OFFER_OVERWRITE 0x0001u

typedef struct aftp_wire_file_offer {
    uint32_t file_id;
    uint64_t size;
    int64_t mtime_ns;
    uint32_t mode;        /* permission bits, at most 07777 */
    uint32_t block_size;
    uint16_t flags;       /* AFTP_WIRE_OFFER_*; undefined bits ignored */
    uint16_t path_len;
    const uint8_t *path;  /* UTF-8, '/'-separated, not NUL-terminated, borrowed */
} aftp_wire_file_offer;

typedef struct aftp_wire_file_reply {
    uint32_t file_id;
    uint16_t error;       /* AFTP_WIRE_ERR_NONE: accepted */
} aftp_wire_file_reply;

/* ABANDON (spec 6.15): the sender can no longer send FILE entry file_id
 * correctly (its source changed or cannot be read); error is never NONE. */
typedef struct aftp_wire_abandon {
    uint32_t file_id;
    uint16_t error;
} aftp_wire_abandon;

/* RATE_UPDATE (spec 6.18): the server's cap on a push client's sender
 * from now on, replacing RATE_CAP's and every older update's. The newest
 * seq wins (the HELLO_ACK's RATE_CAP is sequence 0); cap_bps is bits of
 * UDP payload per second. The decoder checks the layout only: a cap of 0
 * is the state machine's protocol violation (as RATE_CAP's 0 is). */
typedef struct aftp_wire_rate_update {
    uint64_t seq;
    uint64_t cap_bps;
} aftp_wire_rate_update;

/* PULL_END (spec 6.19): the server of a pull offers no entry beyond
 * entry_count (ids 1..entry_count are the session's entries; 0: none). */
typedef struct aftp_wire_pull_end {
    uint32_t entry_count;
} aftp_wire_pull_end;

typedef struct aftp_wire_data {
    uint32_t file_id;
    uint64_t block;
    uint16_t payload_len;
    const uint8_t *payload; /* borrowed */
} aftp_wire_data;

typedef struct aftp_wire_range {
    uint64_t start;
    uint64_t len; /* >= 1 */
} aftp_wire_range;

typedef struct aftp_wire_feedback {
    uint32_t file_id;
    uint64_t largest_pn;       /* highest packet number received */
    uint32_t ack_delay_us;     /* time from receiving largest_pn to sending this */
    uint64_t recv_time_us;     /* receiver's monotonic clock */
    uint64_t packets_received; /* cumulative count of DATA packets received */
    uint64_t blocks_received;  /* distinct blocks of file_id held */
    uint64_t cum_block;        /* every block below this is held */
    /* The missing list is complete for [scan_start, scan_end), where
     * cum_block <= scan_start <= scan_end <= AFTP_WIRE_MAX_BLOCKS; nothing
     * is said about [cum_block, scan_start) or scan_end and above. */
    uint64_t scan_start;
    uint64_t scan_end;
    uint16_t range_count;
    /* Encoding: `ranges` points to range_count ranges, ascending,
     * non-overlapping, non-adjacent, inside [scan_start, scan_end); or it is
     * NULL and range_bytes holds the list already encoded (as a decoded
     * FEEDBACK has it, so decode then encode gives the same bytes).
     * Decoding: `ranges` is NULL; `range_bytes` borrows the encoded list,
     * already validated, to walk with aftp_wire_ranges_next(). */
    const aftp_wire_range *ranges;
    const uint8_t *range_bytes;
    size_t range_bytes_len;
} aftp_wire_feedback;

typedef struct aftp_wire_file_done {
    uint32_t file_id;
    uint64_t block_count;
    uint8_t digest[AFTP_WIRE_DIGEST_LEN];
} aftp_wire_file_done;

typedef struct aftp_wire_file_result {
    uint32_t file_id;
    uint16_t error;
    uint8_t digest[AFTP_WIRE_DIGEST_LEN]; /* what the receiver computed */
} aftp_wire_file_result;

enum aftp_wire_entry_kind {
    AFTP_WIRE_KIND_FILE = 1,
    AFTP_WIRE_KIND_DIR = 2,
    AFTP_WIRE_KIND_SYMLINK = 3
};

/* Entry flags; undefined bits ignored. */
#define AFTP_WIRE_ENTRY_OVERWRITE 0x0001u /* replace an existing entry at path */
#define AFTP_WIRE_ENTRY_RESUME 0x0002u    /* the receiver may answer RESUME */
#define AFTP_WIRE_ENTRY_SYNC 0x0004u      /* the receiver may answer SKIP */
#define AFTP_WIRE_ENTRY_CHECKSUM 0x0008u  /* with SYNC: identical by digest */
#define AFTP_WIRE_ENTRY_HOLES 0x0010u     /* FILE: a hole list follows the target */

/* One entry record of ENTRIES (spec section 6.13). */
typedef struct aftp_wire_entry {
    uint32_t entry_id;      /* also the file_id of its DATA/FILE_DONE/FILE_RESULT */
    uint8_t kind;           /* enum aftp_wire_entry_kind */
    uint16_t flags;         /* AFTP_WIRE_ENTRY_* */
    uint64_t size;          /* 0 for DIR and SYMLINK */
    int64_t mtime_ns;
    uint32_t mode;          /* at most 07777 */
    uint64_t base_block;    /* first stream block */
    uint32_t block_size;    /* 0 for DIR and SYMLINK */
    uint64_t source_id;     /* the sender's identity of the source version */
    uint8_t digest[AFTP_WIRE_DIGEST_LEN]; /* meaningful with CHECKSUM only */
    uint16_t path_len;
    const uint8_t *path;    /* borrowed */
    uint16_t target_len;    /* SYMLINK: 1..4096; else 0 */
    const uint8_t *target;  /* borrowed */
    /* Flag HOLES (FILE only): the blocks wholly inside holes of the
     * source, never sent, in the file's own block indices, coded like
     * VERDICTS' held ranges: `holes` (encoding) or, when NULL, hole_bytes
     * (as decoded; walk with aftp_wire_entry_holes_init). */
    uint16_t hole_count;    /* 1..AFTP_WIRE_MAX_HOLES with HOLES; else 0 */
    const aftp_wire_range *holes;
    const uint8_t *hole_bytes;
    size_t hole_bytes_len;
} aftp_wire_entry;

/* ENTRIES. Encoding: `entries` points to count records, or is NULL and
 * record_bytes holds them already encoded (a decoded packet). Decoding:
 * `entries` is NULL and record_bytes borrows the validated records, to walk
 * with aftp_wire_entries_next(). */
typedef struct aftp_wire_entries {
    uint16_t count;
    const aftp_wire_entry *entries;
    const uint8_t *record_bytes;
    size_t record_bytes_len;
} aftp_wire_entries;

enum aftp_wire_verdict_kind {
    AFTP_WIRE_VERDICT_SEND = 0,
    AFTP_WIRE_VERDICT_RESUME = 1,
    AFTP_WIRE_VERDICT_SKIP = 2,
    AFTP_WIRE_VERDICT_REFUSED = 3
};
#define AFTP_WIRE_VERDICT_MAX AFTP_WIRE_VERDICT_REFUSED

/* One verdict record of VERDICTS (spec section 6.14). A RESUME lists the
 * file's held ranges in its own block indices, coded like FEEDBACK's
 * missing ranges from 0: `ranges` (encoding) or, when NULL, range_bytes
 * (as decoded; walk with aftp_wire_verdict_ranges_init). */
typedef struct aftp_wire_verdict {
    uint32_t entry_id;
    uint8_t verdict;        /* enum aftp_wire_verdict_kind */
    uint16_t error;         /* REFUSED: the wire error; else 0 */
    uint16_t range_count;   /* RESUME: >= 1; else 0 */
    const aftp_wire_range *ranges;
    const uint8_t *range_bytes;
    size_t range_bytes_len;
} aftp_wire_verdict;

/* VERDICTS: as aftp_wire_entries, with verdict records. */
typedef struct aftp_wire_verdicts {
    uint16_t count;
    const aftp_wire_verdict *verdicts;
    const uint8_t *record_bytes;
    size_t record_bytes_len;
} aftp_wire_verdicts;

/* One path of a PULL_REQUEST: 1..AFTP_WIRE_MAX_PATH bytes, no NUL. */
typedef struct aftp_wire_path {
    uint16_t len;
    const uint8_t *bytes; /* borrowed */
} aftp_wire_path;

/* PULL_REQUEST (spec 6.16). flags are ENTRIES' OVERWRITE, RESUME, SYNC
 * and CHECKSUM bits, which the server puts on the entries it offers;
 * max_rate_bps (0: none) caps the server's sender. Encoding: `paths`
 * points to path_count paths, or is NULL and path_bytes holds them
 * already encoded (a decoded packet). Decoding: `paths` is NULL and
 * path_bytes borrows the validated list, to walk with
 * aftp_wire_pull_paths_next(). */
#define AFTP_WIRE_PULL_FLAGS_DEFINED                                                   \
    (AFTP_WIRE_ENTRY_OVERWRITE | AFTP_WIRE_ENTRY_RESUME | AFTP_WIRE_ENTRY_SYNC |       \
     AFTP_WIRE_ENTRY_CHECKSUM)
typedef struct aftp_wire_pull_request {
    uint16_t flags;
    uint64_t max_rate_bps;
    uint16_t path_count;    /* 1..AFTP_WIRE_MAX_PULL_PATHS */
    const aftp_wire_path *paths;
    const uint8_t *path_bytes;
    size_t path_bytes_len;
} aftp_wire_pull_request;

/* PULL_REPLY (spec 6.17): the request's verdict per path, in its order:
 * NONE (served) or the wire error that refused it. */
typedef struct aftp_wire_pull_reply {
    uint16_t count;         /* 1..AFTP_WIRE_MAX_PULL_PATHS */
    uint16_t errors[AFTP_WIRE_MAX_PULL_PATHS];
} aftp_wire_pull_reply;

typedef struct aftp_wire_close {
    uint16_t error;
    uint16_t reason_len;
    const uint8_t *reason; /* UTF-8, borrowed */
} aftp_wire_close;

/* RETRY: header conn_id = the client's id (echoed from its HELLO), pn 0.
 * Body: token_len u16 (1..AFTP_WIRE_MAX_TOKEN) then the token. */
typedef struct aftp_wire_retry {
    uint16_t token_len;
    const uint8_t *token; /* opaque to the client, borrowed */
} aftp_wire_retry;

/* SERVER_KEY: header conn_id = the client's id (echoed from its HELLO with
 * a KEY_REQUEST extension), pn 0, flags 0. Body: exactly the server's
 * 32-byte X25519 static public key. Unauthenticated (spec section 14.9). */
typedef struct aftp_wire_server_key {
    uint8_t key[AFTP_WIRE_SERVER_KEY_LEN];
} aftp_wire_server_key;

typedef struct aftp_wire_packet {
    aftp_wire_header hdr;
    union {
        aftp_wire_version_neg version_neg;
        aftp_wire_hello hello;
        aftp_wire_hello_ack hello_ack;
        aftp_wire_file_offer file_offer;
        aftp_wire_file_reply file_reply;
        aftp_wire_data data;
        aftp_wire_feedback feedback;
        aftp_wire_file_done file_done;
        aftp_wire_file_result file_result;
        aftp_wire_close close;
        aftp_wire_retry retry;
        aftp_wire_server_key server_key;
        aftp_wire_entries entries;
        aftp_wire_verdicts verdicts;
        aftp_wire_abandon abandon;
        aftp_wire_pull_request pull_request;
        aftp_wire_pull_reply pull_reply;
        aftp_wire_rate_update rate_update;
        aftp_wire_pull_end pull_end;
    } u;
} aftp_wire_packet;

/* ---- bounded cursors ----
 * Every read checks the remaining length first; a failed read returns
 * AFTP_ERR_TRUNCATED (or AFTP_ERR_MALFORMED) and leaves the cursor where it was. */
typedef struct aftp_wire_reader {
    const uint8_t *buf;
    size_t len;
    size_t pos;
} aftp_wire_reader;

typedef struct aftp_wire_writer {
    uint8_t *buf;
    size_t cap;
    size_t pos;
} aftp_wire_writer;

void aftp_wire_reader_init(aftp_wire_reader *r, const uint8_t *buf, size_t len);
int aftp_wire_read_u8(aftp_wire_reader *r, uint8_t *v);
int aftp_wire_read_u16(aftp_wire_reader *r, uint16_t *v);
int aftp_wire_read_u32(aftp_wire_reader *r, uint32_t *v);
int aftp_wire_read_u64(aftp_wire_reader *r, uint64_t *v);
int aftp_wire_read_varint(aftp_wire_reader *r, uint64_t *v);
int aftp_wire_read_bytes(aftp_wire_reader *r, size_t n, const uint8_t **p);

void aftp_wire_writer_init(aftp_wire_writer *w, uint8_t *buf, size_t cap);
int aftp_wire_write_u8(aftp_wire_writer *w, uint8_t v);
int aftp_wire_write_u16(aftp_wire_writer *w, uint16_t v);
int aftp_wire_write_u32(aftp_wire_writer *w, uint32_t v);
int aftp_wire_write_u64(aftp_wire_writer *w, uint64_t v);
int aftp_wire_write_varint(aftp_wire_writer *w, uint64_t v);
int aftp_wire_write_bytes(aftp_wire_writer *w, const uint8_t *p, size_t n);

/* Bytes the QUIC-style variable-length encoding of v takes (1, 2, 4 or 8);
 * 0 when v exceeds AFTP_WIRE_VARINT_MAX. */
size_t aftp_wire_varint_len(uint64_t v);

/* ---- whole packets ----
 * aftp_wire_decode: parse one plaintext datagram (tag already removed).
 * Checks every length and count against the buffer and the limits above,
 * rejects datagrams longer than AFTP_WIRE_MAX_DATAGRAM, trailing bytes
 * (HELLO: only zero padding may follow), unknown types and unknown
 * versions. Reserved header flag bits are ignored (kept in hdr.flags).
 * Returns AFTP_OK or a negative aftp_error; *out is written only on success. */
int aftp_wire_decode(const uint8_t *buf, size_t len, aftp_wire_packet *out);

/* aftp_wire_encode: write pkt into buf[0..cap). HELLO is zero-padded to
 * AFTP_WIRE_HELLO_MIN_LEN. On success *written holds the length; on failure
 * nothing meaningful is in buf and *written is untouched. A packet longer
 * than AFTP_WIRE_MAX_DATAGRAM gives AFTP_ERR_LIMIT when cap is at least
 * that, AFTP_ERR_BUFFER_TOO_SMALL otherwise. */
int aftp_wire_encode(const aftp_wire_packet *pkt, uint8_t *buf, size_t cap, size_t *written);

/* Only the common header; the datapath uses it to peek at type and
 * connection id before deciding what to do with a datagram. */
int aftp_wire_header_decode(const uint8_t *buf, size_t len, aftp_wire_header *out);
/* Writes AFTP_WIRE_HEADER_LEN bytes; returns AFTP_OK or an error. */
int aftp_wire_header_encode(const aftp_wire_header *hdr, uint8_t *buf, size_t cap);

/* The DATA header (common header + file id + block index) alone, so the
 * sender can put the payload in a separate iovec that points into the
 * source mapping. Writes exactly AFTP_WIRE_HEADER_LEN + AFTP_WIRE_DATA_FIXED
 * bytes and returns AFTP_OK; hdr->type must be AFTP_WIRE_DATA. */
int aftp_wire_data_header_encode(const aftp_wire_header *hdr, uint32_t file_id,
                                 uint64_t block, uint8_t *buf, size_t cap);

/* A server's stateless answer to one datagram (spec section 12.2): when
 * the datagram is at least AFTP_WIRE_HELLO_MIN_LEN bytes and its header
 * version is neither 0 nor AFTP_WIRE_VERSION, writes a VERSION_NEG that
 * lists [AFTP_WIRE_VERSION] and echoes its conn_id and pn into out[0..cap),
 * sets *out_len and returns 1. Returns 0 when the datagram gets no answer
 * (shorter, no full header, our version, or version 0), or a negative
 * aftp_error (AFTP_ERR_BUFFER_TOO_SMALL) when the answer does not fit. */
#define AFTP_WIRE_VERSION_NEG_REPLY_LEN (AFTP_WIRE_HEADER_LEN + 2u)
int aftp_wire_version_neg_reply(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap,
                                size_t *out_len);

/* Walk the missing ranges of a decoded FEEDBACK. Initialise with the decoded
 * feedback; each call yields the next range and returns 1, or 0 at the end. */
typedef struct aftp_wire_range_iter {
    aftp_wire_reader r;
    uint64_t next_min;   /* smallest start the next range may have */
    uint16_t left;
} aftp_wire_range_iter;

void aftp_wire_range_iter_init(aftp_wire_range_iter *it, const aftp_wire_feedback *fb);
int aftp_wire_ranges_next(aftp_wire_range_iter *it, aftp_wire_range *out);

/* Walk the records of a decoded ENTRIES / VERDICTS (or of one built for
 * encoding with record_bytes): each call yields the next record and
 * returns 1, or 0 at the end. The pointers in a record borrow from the
 * datagram. */
typedef struct aftp_wire_record_iter {
    aftp_wire_reader r;
    uint16_t left;
} aftp_wire_record_iter;

void aftp_wire_entries_iter_init(aftp_wire_record_iter *it, const aftp_wire_entries *e);
int aftp_wire_entries_next(aftp_wire_record_iter *it, aftp_wire_entry *out);
void aftp_wire_verdicts_iter_init(aftp_wire_record_iter *it, const aftp_wire_verdicts *v);
int aftp_wire_verdicts_next(aftp_wire_record_iter *it, aftp_wire_verdict *out);
/* The held ranges of a decoded RESUME verdict, walked with
 * aftp_wire_ranges_next() (file block indices). */
void aftp_wire_verdict_ranges_init(aftp_wire_range_iter *it, const aftp_wire_verdict *v);

/* Walk the paths of a decoded PULL_REQUEST (or of one built with
 * path_bytes): each call yields the next path and returns 1, or 0 at the
 * end. */
void aftp_wire_pull_paths_iter_init(aftp_wire_record_iter *it, const aftp_wire_pull_request *q);
int aftp_wire_pull_paths_next(aftp_wire_record_iter *it, aftp_wire_path *out);

/* The hole ranges of a decoded entry with flag HOLES, walked with
 * aftp_wire_ranges_next() (file block indices). */
void aftp_wire_entry_holes_init(aftp_wire_range_iter *it, const aftp_wire_entry *e);

/* Stream blocks an entry occupies: its file's block count, 0 for DIR and
 * SYMLINK (spec section 6.13). The entry's end is base_block + this. */
uint64_t aftp_wire_entry_blocks(const aftp_wire_entry *e);
/* Bytes one entry record takes on the wire (for batching). */
size_t aftp_wire_entry_len(const aftp_wire_entry *e);

/* Bytes the encoded range list takes (for sizing a FEEDBACK before
 * encoding), the first range coded from scan_start; 0 if the ranges are
 * invalid (not ascending and non-adjacent inside [scan_start,
 * AFTP_WIRE_MAX_BLOCKS)). */
size_t aftp_wire_ranges_encoded_len(uint64_t scan_start, const aftp_wire_range *ranges,
                                    size_t count);

/* ---- extension TLVs (spec section 12.3) ---- */

/* Finds the first TLV of `type` in an extension block that aftp_wire_decode
 * already validated (a decoded HELLO's or HELLO_ACK's ext/ext_len): returns
 * 1 and sets *value / *value_len, or 0 when there is none. */
int aftp_wire_ext_find(const uint8_t *ext, size_t ext_len, uint16_t type, const uint8_t **value,
                       uint16_t *value_len);
/* Appends one TLV (type, length, value) to w; AFTP_ERR_BUFFER_TOO_SMALL
 * when it does not fit (w unchanged). */
int aftp_wire_ext_put(aftp_wire_writer *w, uint16_t type, const uint8_t *value, uint16_t value_len);
/* Appends to w every TLV of a validated extension block but those of
 * `type`, byte for byte in their order (what message 2 authenticates of a
 * HELLO_ACK: its TLVs other than HANDSHAKE, spec section 14.2.3).
 * AFTP_ERR_BUFFER_TOO_SMALL when they do not fit. */
int aftp_wire_ext_put_except(aftp_wire_writer *w, const uint8_t *ext, size_t ext_len,
                             uint16_t type);
/* The RATE_CAP of a validated HELLO_ACK extension block (spec section
 * 12.3): 0 when there is none; 1 and *bps for a well-formed one (8 bytes,
 * non-zero); -1 for one of another length or 0 bits/s. */
int aftp_wire_ext_rate_cap(const uint8_t *ext, size_t ext_len, uint64_t *bps);
/* Appends a RATE_CAP TLV: empty (a HELLO's announcement) when bps is 0,
 * else its u64 value (a HELLO_ACK's cap). */
int aftp_wire_ext_put_rate_cap(aftp_wire_writer *w, uint64_t bps);

/* The PIPELINE of a validated extension block (spec section 12.3.2): 0
 * when there is none; 1 and *window for a well-formed one (4 bytes,
 * 1..AFTP_WIRE_MAX_WINDOW); -1 otherwise. */
int aftp_wire_ext_pipeline(const uint8_t *ext, size_t ext_len, uint32_t *window);
/* Appends a PIPELINE TLV with `window` (1..AFTP_WIRE_MAX_WINDOW, else
 * AFTP_ERR_INVALID_ARGUMENT). */
int aftp_wire_ext_put_pipeline(aftp_wire_writer *w, uint32_t window);

/* The PULL of a validated extension block (spec section 12.3.3): 0 when
 * there is none, 1 for a well-formed (empty) one, -1 otherwise. */
int aftp_wire_ext_pull(const uint8_t *ext, size_t ext_len);
/* An extension whose value is empty (PULL_END, spec 12.3.5): 1 present
 * and empty, 0 absent, -1 with a value. */
int aftp_wire_ext_empty(const uint8_t *ext, size_t ext_len, uint16_t type);

/* An ENTRIES body (count and records, spec 6.13) without its header: the
 * early entries of message 1's payload (spec 12.3.4). Decode: the
 * records stay in buf (out->record_bytes), validated as an ENTRIES' are,
 * trailing bytes MALFORMED. Encode: *len bytes written. */
int aftp_wire_early_entries_decode(const uint8_t *buf, size_t len, aftp_wire_entries *out);
int aftp_wire_early_entries_encode(const aftp_wire_entries *e, uint8_t *buf, size_t cap,
                                   size_t *len);

/* A PULL_REQUEST body (flags, max_rate, count and paths, spec 6.16)
 * without its header: a pull's early request in message 1's payload (spec
 * 12.3.4). Validated as a PULL_REQUEST's, trailing bytes MALFORMED; the
 * decoded paths stay in buf. */
int aftp_wire_early_request_decode(const uint8_t *buf, size_t len,
                                   aftp_wire_pull_request *out);
int aftp_wire_early_request_encode(const aftp_wire_pull_request *q, uint8_t *buf, size_t cap,
                                   size_t *len);

/* The handshake prologue of a HELLO (spec section 14.2.2): the bytes both
 * sides mix into the Noise transcript so that changing the offer (role,
 * cipher list, max_datagram, client id) makes the handshake fail, i.e. a
 * downgrade is detected. It does not cover the packet number or the
 * extensions, so a resent HELLO keeps the same handshake message.
 * Writes at most AFTP_WIRE_PROLOGUE_MAX bytes. */
#define AFTP_WIRE_PROLOGUE_MAX (16u + AFTP_WIRE_MAX_CIPHERS)
int aftp_wire_hello_prologue(const aftp_wire_hello *hello, uint32_t client_conn_id, uint8_t *out,
                             size_t cap, size_t *out_len);

/* Block model (spec section 7). */
uint64_t aftp_wire_block_count(uint64_t file_size, uint32_t block_size);
/* Length of block `index` of a file, 0 when the index is out of range. */
uint32_t aftp_wire_block_len(uint64_t file_size, uint32_t block_size, uint64_t index);

const char *aftp_wire_type_name(uint8_t type);
const char *aftp_wire_error_name(uint16_t error);

#ifdef __cplusplus
}
#endif

#endif /* AFTP_WIRE_H */
