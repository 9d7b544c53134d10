#!/usr/bin/env python3
"""Independent decoder for the aftp wire test vectors.

Written from the packet layouts (proto/aftp_wire.h, spec/aftp-protocol.md),
sharing no code with the C implementation. For every vector file given on
the command line it decodes each record's `hex` and checks the result
against the record's fields; records with `expect` must be rejected.
Exit status 0 when every vector agrees, 1 otherwise.
"""
import sys

# ---- protocol constants (version 1) ----
HEADER_LEN = 16
TAG_LEN = 16
MAX_DATAGRAM = 65507
MIN_DATAGRAM = 1200
HELLO_MIN_LEN = 1200
MIN_BLOCK = 64
MAX_BLOCK = MAX_DATAGRAM - HEADER_LEN - 12 - TAG_LEN
MAX_FILE_SIZE = 1 << 62
MAX_BLOCKS = MAX_FILE_SIZE // MIN_BLOCK
MAX_PATH = 4096
MAX_REASON = 512
MAX_CIPHERS = 8
MAX_VERSIONS = 32
MAX_RANGES = 8192
DIGEST_LEN = 16
MAX_TOKEN = 64
SERVER_KEY_LEN = 32
MAX_ENTRIES = 1024
MAX_HOLES = 1024
HOLES = 0x0010
MAX_VERDICTS = 1024
MAX_PULL_PATHS = 64

TYPES = ['VERSION_NEG', 'HELLO', 'HELLO_ACK', 'FILE_OFFER', 'FILE_REPLY', 'DATA',
         'FEEDBACK', 'FILE_DONE', 'FILE_RESULT', 'CLOSE', 'RETRY', 'SERVER_KEY',
         'ENTRIES', 'VERDICTS', 'ABANDON', 'PULL_REQUEST', 'PULL_REPLY',
         'RATE_UPDATE', 'PULL_END']
KINDS = {'FILE': 1, 'DIR': 2, 'SYMLINK': 3}
VERDICTS = {'SEND': 0, 'RESUME': 1, 'SKIP': 2, 'REFUSED': 3}
ROLES = {'PUSH': 1, 'PULL': 2}
CIPHERS = {'NONE': 0, 'AES256GCM': 1, 'CHACHA20POLY1305': 2}
ERRORS = {name: code for code, name in enumerate(
    ['NONE', 'PROTOCOL', 'VERSION', 'FILE_EXISTS', 'NO_SPACE', 'IO', 'DIGEST_MISMATCH',
     'PATH_REJECTED', 'IDLE_TIMEOUT', 'CANCELLED', 'INTERNAL', 'SOURCE_CHANGED',
     'PERMISSION', 'LIMIT', 'UNAUTHORIZED', 'NOT_FOUND'])}
REJECTIONS = {'TRUNCATED', 'MALFORMED', 'UNKNOWN_TYPE', 'VERSION', 'LIMIT'}


class Reject(Exception):
    """The datagram is not a valid version 1 packet."""


class VectorError(Exception):
    """The vector file itself is wrong."""


# ---- decoding ----

class Cursor:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if n > len(self.data) - self.pos:
            raise Reject('truncated at byte %d (need %d more)' % (self.pos, n))
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def uint(self, n):
        return int.from_bytes(self.take(n), 'big')

    def varint(self):
        if self.pos >= len(self.data):
            raise Reject('truncated varint')
        size = 1 << (self.data[self.pos] >> 6)
        raw = bytearray(self.take(size))
        raw[0] &= 0x3f
        value = int.from_bytes(raw, 'big')
        shortest = 1 if value < 1 << 6 else 2 if value < 1 << 14 else 4 if value < 1 << 30 else 8
        if size != shortest:
            raise Reject('varint %d not in its shortest form' % value)
        return value

    def rest(self):
        return self.take(len(self.data) - self.pos)

    def left(self):
        return len(self.data) - self.pos


def check(condition, why):
    if not condition:
        raise Reject(why)


def extensions(c):
    ext = c.take(c.uint(2))
    tlv = Cursor(ext)
    while tlv.left():
        tlv.uint(2)                 # type
        tlv.take(tlv.uint(2))       # value
    return ext


def body_version_neg(c):
    count = c.uint(1)
    check(1 <= count <= MAX_VERSIONS, 'version count %d' % count)
    return {'versions': list(c.take(count))}


def body_hello(c):
    role = c.uint(1)
    count = c.uint(1)
    check(1 <= count <= MAX_CIPHERS, 'cipher count %d' % count)
    f = {'role': role, 'ciphers': list(c.take(count)), 'max_datagram': c.uint(2)}
    f['ext'] = extensions(c)
    check(role in ROLES.values(), 'role %d' % role)
    check(MIN_DATAGRAM <= f['max_datagram'] <= MAX_DATAGRAM, 'max_datagram')
    check(len(c.data) >= HELLO_MIN_LEN, 'HELLO of %d bytes' % len(c.data))
    check(not any(c.rest()), 'non-zero HELLO padding')
    return f


def body_hello_ack(c):
    f = {'server_conn_id': c.uint(4), 'cipher': c.uint(1), 'max_datagram': c.uint(2)}
    f['ext'] = extensions(c)
    check(f['cipher'] in CIPHERS.values(), 'cipher %d' % f['cipher'])
    check(MIN_DATAGRAM <= f['max_datagram'] <= MAX_DATAGRAM, 'max_datagram')
    return f


def body_file_offer(c):
    f = {'file_id': c.uint(4), 'size': c.uint(8)}
    mtime = c.uint(8)
    f['mtime_ns'] = signed64(mtime)
    f.update(mode=c.uint(4), block_size=c.uint(4), offer_flags=c.uint(2))
    f['path'] = c.take(c.uint(2))
    check(f['size'] <= MAX_FILE_SIZE, 'size')
    check(f['mode'] <= 0o7777, 'mode')
    check(MIN_BLOCK <= f['block_size'] <= MAX_BLOCK, 'block_size')
    check(1 <= len(f['path']) <= MAX_PATH and 0 not in f['path'], 'path')
    return f


def body_file_reply(c):
    return {'file_id': c.uint(4), 'error': c.uint(2)}


def body_abandon(c):
    f = {'file_id': c.uint(4), 'error': c.uint(2)}
    check(f['error'] != 0, 'ABANDON without an error')
    return f


def body_data(c):
    f = {'file_id': c.uint(4), 'block': c.uint(8), 'payload': c.rest()}
    check(1 <= len(f['payload']) <= MAX_BLOCK, 'payload of %d bytes' % len(f['payload']))
    check(f['block'] < MAX_BLOCKS, 'block index')
    return f


def range_list(c, count, scan_start, scan_end):
    """count ranges coded as in FEEDBACK: first gap from scan_start."""
    out, next_start = [], scan_start
    for _ in range(count):
        check(next_start <= scan_end, 'range list past its end')
        start = next_start + c.varint()
        length = c.varint() + 1
        check(start + length <= scan_end, 'range ends past scan_end')
        out.append((start, length))
        next_start = start + length + 1
    return out


def body_feedback(c):
    f = {}
    for key, size in (('file_id', 4), ('largest_pn', 8), ('ack_delay_us', 4),
                      ('recv_time_us', 8), ('packets_received', 8), ('blocks_received', 8),
                      ('cum_block', 8), ('scan_start', 8), ('scan_end', 8)):
        f[key] = c.uint(size)
    count = c.uint(2)
    check(count <= MAX_RANGES, 'range count %d' % count)
    check(f['cum_block'] <= f['scan_start'] <= f['scan_end'] <= MAX_BLOCKS,
          'cum_block/scan_start/scan_end out of order')
    check(f['cum_block'] <= f['blocks_received'], 'cum_block above blocks_received')
    # The list describes [scan_start, scan_end); the first gap counts from scan_start.
    f['ranges'] = range_list(c, count, f['scan_start'], f['scan_end'])
    return f


def body_file_done(c):
    f = {'file_id': c.uint(4), 'block_count': c.uint(8), 'digest': c.take(DIGEST_LEN)}
    check(f['block_count'] <= MAX_BLOCKS, 'block_count')
    return f


def body_file_result(c):
    return {'file_id': c.uint(4), 'error': c.uint(2), 'digest': c.take(DIGEST_LEN)}


def body_close(c):
    error = c.uint(2)
    length = c.uint(2)
    check(length <= MAX_REASON, 'reason of %d bytes' % length)
    return {'error': error, 'reason': c.take(length)}


def body_retry(c):
    length = c.uint(2)
    check(1 <= length <= MAX_TOKEN, 'token of %d bytes' % length)
    return {'token': c.take(length)}


def body_server_key(c):
    return {'key': c.take(SERVER_KEY_LEN)}


def signed64(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def batch_count(c, limit):
    count = c.uint(2)
    check(1 <= count <= limit, 'record count %d' % count)
    return count


def entry_blocks(e):
    if e['kind'] != KINDS['FILE']:
        return 0
    return -(-e['size'] // e['block_size'])


def check_entry(e):
    kind = e['kind']
    check(e['entry_id'] != 0, 'entry id 0')
    check(kind in KINDS.values(), 'kind %d' % kind)
    check(e['mode'] <= 0o7777, 'mode')
    if kind == KINDS['FILE']:
        check(e['size'] <= MAX_FILE_SIZE, 'size')
        check(MIN_BLOCK <= e['block_size'] <= MAX_BLOCK, 'block_size')
        check(not e['target'], 'a file with a target')
    else:
        check(e['size'] == 0 and e['block_size'] == 0, 'a dir or link with a size')
        if kind == KINDS['DIR']:
            check(not e['target'], 'a directory with a target')
        else:
            check(1 <= len(e['target']) <= MAX_PATH and 0 not in e['target'], 'link target')
    check(1 <= len(e['path']) <= MAX_PATH and 0 not in e['path'], 'path')
    check(e['base_block'] + entry_blocks(e) <= MAX_BLOCKS, 'entry ends past MAX_BLOCKS')


def read_entry(c):
    e = {'entry_id': c.uint(4), 'kind': c.uint(1), 'entry_flags': c.uint(2),
         'size': c.uint(8), 'mtime_ns': signed64(c.uint(8)), 'mode': c.uint(4),
         'base_block': c.uint(8), 'block_size': c.uint(4), 'source_id': c.uint(8),
         'digest': c.take(DIGEST_LEN)}
    path_len, target_len = c.uint(2), c.uint(2)
    e['path'] = c.take(path_len)
    e['target'] = c.take(target_len)
    return e


def read_holes(c, e):
    """Flag HOLES (0x10): a FILE's hole list, coded as VERDICTS' held ranges."""
    if not e['entry_flags'] & HOLES:
        return
    check(e['kind'] == KINDS['FILE'], 'a hole list on a dir or link')
    count = c.uint(2)
    check(count != 0, 'a hole list of 0 ranges')
    check(count <= MAX_HOLES, '%d hole ranges' % count)
    e['holes'] = range_list(c, count, 0, entry_blocks(e))


def body_entries(c):
    f, prev = {}, None
    for i in range(1, batch_count(c, MAX_ENTRIES) + 1):
        e = read_entry(c)
        check_entry(e)
        if prev is not None:
            check(e['entry_id'] == prev['entry_id'] + 1, 'entry ids not consecutive')
            check(e['base_block'] == prev['base_block'] + entry_blocks(prev),
                  'entry not laid right after the previous one')
        read_holes(c, e)
        prev = e
        f.update(('entry.%d.%s' % (i, k), v) for k, v in e.items())
    return f


def body_verdicts(c):
    f, prev_id, total = {}, 0, 0
    for i in range(1, batch_count(c, MAX_VERDICTS) + 1):
        v = {'entry_id': c.uint(4), 'verdict': c.uint(1), 'error': c.uint(2)}
        count = c.uint(2)
        check(v['entry_id'] > prev_id, 'verdict ids not ascending')
        check(v['verdict'] in VERDICTS.values(), 'verdict %d' % v['verdict'])
        check((v['error'] != 0) == (v['verdict'] == VERDICTS['REFUSED']), 'error')
        check((count != 0) == (v['verdict'] == VERDICTS['RESUME']), 'held range count')
        total += count
        check(total <= MAX_RANGES, '%d held ranges' % total)
        v['held'] = range_list(c, count, 0, MAX_BLOCKS)
        prev_id = v['entry_id']
        f.update(('verdict.%d.%s' % (i, k), x) for k, x in v.items())
    return f


def body_pull_request(c):
    f = {'pull_flags': c.uint(2), 'max_rate': c.uint(8)}
    count = c.uint(2)
    check(1 <= count <= MAX_PULL_PATHS, 'path count %d' % count)
    for i in range(1, count + 1):
        path = c.take(c.uint(2))
        check(1 <= len(path) <= MAX_PATH and 0 not in path, 'path %d' % i)
        f['path.%d' % i] = path
    return f


def body_pull_reply(c):
    count = c.uint(2)
    check(1 <= count <= MAX_PULL_PATHS, 'error count %d' % count)
    return {'errors': [c.uint(2) for _ in range(count)]}


def body_rate_update(c):
    """The decoder reads the layout; a cap of 0 is the client's protocol
    violation (spec 6.18), not a decoding failure."""
    return {'seq': c.uint(8), 'cap_bps': c.uint(8)}


def body_pull_end(c):
    return {'entry_count': c.uint(4)}


BODIES = [body_version_neg, body_hello, body_hello_ack, body_file_offer, body_file_reply,
          body_data, body_feedback, body_file_done, body_file_result, body_close,
          body_retry, body_server_key, body_entries, body_verdicts, body_abandon,
          body_pull_request, body_pull_reply, body_rate_update, body_pull_end]


def decode(data):
    check(len(data) <= MAX_DATAGRAM, 'datagram of %d bytes' % len(data))
    c = Cursor(data)
    f = {'version': c.uint(1), 'type': c.uint(1), 'flags': c.uint(2),
         'conn_id': c.uint(4), 'pn': c.uint(8)}
    if f['version'] == 0:
        check(f['type'] == 0, 'header version 0 on type %d' % f['type'])
    else:
        check(f['version'] == 1, 'version %d' % f['version'])
        check(1 <= f['type'] < len(TYPES), 'type %d' % f['type'])
    f.update(BODIES[f['type']](c))
    check(c.left() == 0, '%d trailing bytes' % c.left())
    return f


# ---- vector files ----

def read_records(path):
    """Yields (line, {key: value}) per record."""
    record, line_no, last_key = {}, 0, None
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip('\r\n')
            if line.startswith('#'):
                continue
            if not line.strip():
                if record:
                    yield line_no, record
                record, last_key = {}, None
                continue
            if line[0] in ' \t':
                if last_key is None:
                    raise VectorError('%s:%d: continuation outside a record' % (path, n))
                record[last_key] += ' ' + line.strip()
                continue
            key, sep, value = line.partition('=')
            key = key.strip()
            if not sep or key in record:
                raise VectorError('%s:%d: bad or repeated key' % (path, n))
            if not record:
                line_no = n
            record[key], last_key = value.strip(), key
    if record:
        yield line_no, record


def integer(text):
    text = text.strip()
    sign = -1 if text.startswith('-') else 1
    digits = text.lstrip('-')
    base = 16 if digits.startswith('0x') else 8 if digits.startswith('0o') else 10
    return sign * int(digits[2:] if base != 10 else digits, base)


def named(text, names):
    return names[text] if text in names else integer(text)


def byte_string(text):
    text = text.strip()
    if text.startswith('"'):
        if len(text) < 2 or not text.endswith('"'):
            raise VectorError('unterminated text %r' % text)
        return text[1:-1].encode('utf-8')
    out = bytearray()
    for token in text.split():
        byte, star, count = token.partition('*')
        out += bytes.fromhex(byte) * (int(count) if star else 1)
    return bytes(out)


def ranges(text):
    return [tuple(integer(x) for x in item.split('+')) for item in text.split()]


# How each field of a record reads, by key.
FIELD_KINDS = {
    'version': integer, 'flags': integer, 'conn_id': integer, 'pn': integer,
    'type': lambda t: TYPES.index(t),
    'versions': lambda t: [integer(x) for x in t.split()],
    'role': lambda t: named(t, ROLES),
    'ciphers': lambda t: [named(x, CIPHERS) for x in t.split()],
    'cipher': lambda t: named(t, CIPHERS),
    'error': lambda t: named(t, ERRORS),
    'ranges': ranges,
    'ext': byte_string, 'path': byte_string, 'payload': byte_string, 'reason': byte_string,
    'digest': byte_string, 'token': byte_string, 'key': byte_string,
    'target': byte_string, 'held': ranges, 'holes': ranges,
    'kind': lambda t: named(t, KINDS), 'verdict': lambda t: named(t, VERDICTS),
    'errors': lambda t: [named(x, ERRORS) for x in t.split()],
}


def expected_fields(record):
    fields = {}
    for key, text in record.items():
        if key in ('name', 'hex'):
            continue
        # entry.N.FIELD and verdict.N.FIELD read as FIELD does; path.N is a path.
        field = 'path' if key.startswith('path.') else key.rpartition('.')[2]
        fields[key] = FIELD_KINDS.get(field, integer)(text)
    return fields


def check_record(record):
    """Returns a list of problems (empty when the vector agrees)."""
    data = byte_string(record['hex'])
    if 'expect' in record:
        if record['expect'] not in REJECTIONS or set(record) != {'name', 'hex', 'expect'}:
            raise VectorError('bad invalid vector')
        try:
            decode(data)
        except Reject:
            return [], None
        return ['decoded, but must be rejected'], None
    want = expected_fields(record)
    try:
        got = decode(data)
    except Reject as e:
        return ['rejected: %s' % e], None
    problems = ['%s: hex says %r, fields say %r' % (k, got.get(k), want.get(k))
                for k in sorted(set(want) | set(got)) if got.get(k) != want.get(k)]
    return problems, got['type']


def decode_early_entries(payload):
    """Message 1's application payload under EARLY_ENTRIES (spec 12.3.4):
    an ENTRIES body (count, records) whose first entry is 1 at block 0, at
    most 256 bytes."""
    check(len(payload) <= 256, 'early entries of %d bytes' % len(payload))
    c = Cursor(payload)
    f = body_entries(c)
    check(c.left() == 0, '%d trailing bytes' % c.left())
    check(f['entry.1.entry_id'] == 1 and f['entry.1.base_block'] == 0,
          'early entries that do not start the stream')
    return f


def decode_early_request(payload):
    """A pull's message 1 payload under EARLY_ENTRIES (spec 12.3.4): a
    PULL_REQUEST body (flags, max_rate, count, paths), at most 256 bytes."""
    check(len(payload) <= 256, 'early request of %d bytes' % len(payload))
    c = Cursor(payload)
    f = body_pull_request(c)
    check(c.left() == 0, '%d trailing bytes' % c.left())
    return f


def check_early_entries(paths):
    """Each handshake of crypto.vec (beside the given files) whose message 1
    carries an application payload: in a push it decodes as early entries,
    equal to the ENTRIES vector whose body it is; in a pull as an early
    request, equal to a PULL_REQUEST vector's body. Returns the failure
    count."""
    import os
    crypto = os.path.join(os.path.dirname(paths[0]), 'crypto.vec') if paths else ''
    if not os.path.exists(crypto):
        return 0
    bodies = {}
    for path in paths:
        for _, record in read_records(path):
            data = byte_string(record.get('hex', ''))
            if len(data) > HEADER_LEN and data[1] in (TYPES.index('ENTRIES'),
                                                      TYPES.index('PULL_REQUEST')):
                bodies[(data[1], data[HEADER_LEN:])] = record['name']
    failures = 0
    for line, record in read_records(crypto):
        payload = byte_string(record.get('init_payload', ''))
        if not payload:
            continue
        pull = record.get('hello_role') == 'PULL'
        kind = TYPES.index('PULL_REQUEST' if pull else 'ENTRIES')
        try:
            (decode_early_request if pull else decode_early_entries)(payload)
            check((kind, payload) in bodies, 'no %s vector with this body' % TYPES[kind])
        except (Reject, VectorError, KeyError) as e:
            print('FAIL %s:%d %s: early entries: %s' % (crypto, line, record['name'], e))
            failures += 1
    return failures


def main(paths):
    failures, total, seen = 0, 0, set()
    for path in paths:
        for line, record in read_records(path):
            total += 1
            name = record.get('name', '?')
            try:
                problems, ptype = check_record(record)
            except (VectorError, ValueError, KeyError) as e:
                problems, ptype = ['unreadable vector: %s' % e], None
            for p in problems:
                print('FAIL %s:%d %s: %s' % (path, line, name, p))
            failures += bool(problems)
            if ptype is not None and not problems:
                seen.add(ptype)
    for t in sorted(set(range(len(TYPES))) - seen):
        print('FAIL no valid vector of type %s' % TYPES[t])
        failures += 1
    failures += check_early_entries(paths)
    print('%d vectors in %d files, %d failures' % (total, len(paths), failures))
    return 1 if failures or total == 0 else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
