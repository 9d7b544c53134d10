#!/usr/bin/env python3
"""Independent implementation of aftp's handshake, key schedule and packet
protection, written from the Noise specification (revision 34) and
common/aftp_handshake.h / common/aftp_aead.h with Python's hashlib/hmac
and the `cryptography` package (no libsodium), checked against
spec/vectors/crypto.vec. The C implementation is checked against the same
file by test_crypto_vectors, so passing both means the two agree.

    independent_crypto.py check crypto.vec     exit 0 when every record agrees
    independent_crypto.py fill crypto.vec      print the file with every
                                               output recomputed from its inputs
"""
import hashlib
import hmac
import os
import sys

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

sys.dont_write_bytecode = True  # the test never writes into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'vectors'))
from independent_decoder import byte_string, integer, read_records  # noqa: E402

PROTOCOL = b'Noise_IKpsk1_25519_ChaChaPoly_BLAKE2b'
CIPHERS = {'NONE': 0, 'AES256GCM': 1, 'CHACHA20POLY1305': 2}
ROLES = {'PUSH': 1, 'PULL': 2}
WIRE_VERSION = 1
FLAG_PROTECTED, FLAG_KEY_PHASE = 0x0001, 0x0002


def blake2b(data):
    return hashlib.blake2b(data).digest()


def hkdf(ck, ikm, outputs):
    temp = hmac.new(ck, ikm, hashlib.blake2b).digest()
    out, prev = [], b''
    for i in range(1, outputs + 1):
        prev = hmac.new(temp, prev + bytes([i]), hashlib.blake2b).digest()
        out.append(prev)
    return out


def public(priv):
    return X25519PrivateKey.from_private_bytes(priv).public_key().public_bytes(
        Encoding.Raw, PublicFormat.Raw)


def dh(priv, pub):
    return X25519PrivateKey.from_private_bytes(priv).exchange(X25519PublicKey.from_public_bytes(pub))


class Symmetric:
    """Noise SymmetricState with its CipherState (sections 5.1, 5.2)."""

    def __init__(self, prologue, responder_static_pub, protocol=PROTOCOL):
        self.h = protocol.ljust(64, b'\0')
        self.ck, self.k, self.n = self.h, None, 0
        self.mix_hash(prologue)
        self.mix_hash(responder_static_pub)  # IK pre-message <- s

    def mix_hash(self, data):
        self.h = blake2b(self.h + data)

    def mix_key(self, ikm):
        self.ck, temp_k = hkdf(self.ck, ikm, 2)
        self.k, self.n = temp_k[:32], 0

    def mix_key_and_hash(self, ikm):
        self.ck, temp_h, temp_k = hkdf(self.ck, ikm, 3)
        self.mix_hash(temp_h)
        self.k, self.n = temp_k[:32], 0

    def mix_ephemeral(self, pub):  # token e in a psk handshake
        self.mix_hash(pub)
        self.mix_key(pub)

    def nonce(self):
        self.n += 1
        return bytes(4) + (self.n - 1).to_bytes(8, 'little')

    def encrypt_and_hash(self, plaintext):
        ct = ChaCha20Poly1305(self.k).encrypt(self.nonce(), plaintext, self.h)
        self.mix_hash(ct)
        return ct

    def decrypt_and_hash(self, ct):
        pt = ChaCha20Poly1305(self.k).decrypt(self.nonce(), ct, self.h)
        self.mix_hash(ct)
        return pt

    def split(self):
        k1, k2 = hkdf(self.ck, b'', 2)
        return k1[:32], k2[:32]


# Noise_N_25519_ChaChaPoly_BLAKE2b from the public Noise test vectors
# (snow's tests/vectors/snow.txt): checks this file's Noise machinery (hash,
# HMAC/HKDF, ChaChaPoly nonces and associated data, Split) against another
# implementation before it is trusted with aftp's own vectors.
KNOWN_N = {k: bytes.fromhex(v) for k, v in {
    'prologue': '5468657265206973206e6f20726967687420616e642077726f6e672e205468657265'
                '2773206f6e6c792066756e20616e6420626f72696e672e',
    'init_ephemeral': 'c8724f7e486ece4265053aebd16474ab2f000a776ceae9f92c9a83bd28e1e0e0',
    'init_remote_static': '72f91ec9f45015b158fd726b1bec67e5b78856881430535b7bda11e3b0d3ff18',
    'payload0': '0d95edd9631648aa5a35d83bd39a8e8c40affdebd7929ee59692a792dd2b183e',
    'ciphertext0': 'fe94edd31a6524ebbe50fcb348bafe73896de23b0bd296b6c0322226ee603e09'
                   '9b1e626076951ebbc2c95b80983fb4302b0370733efc71f8510e86f5f3a811cb'
                   '50cd461a975ed01dab031712ebdcfc83',
    'payload1': 'dfd93da851ecc4ff54661cb9a1e4cc6319e3805898d437498c12ab4af84b235c',
    'ciphertext1': '056d802959210ea8fcf00ba95d0ed8e1658784e16966a92f58a842f882098052'
                   '207409aae708060dad92e741015df18f',
}.items()}


def known_answer():
    """Pattern N: <- s ... -> e, es; then one transport message."""
    v = KNOWN_N
    sym = Symmetric(v['prologue'], v['init_remote_static'], b'Noise_N_25519_ChaChaPoly_BLAKE2b')
    msg = public(v['init_ephemeral'])
    sym.mix_hash(msg)
    sym.mix_key(dh(v['init_ephemeral'], v['init_remote_static']))
    msg += sym.encrypt_and_hash(v['payload0'])
    transport = ChaCha20Poly1305(sym.split()[0]).encrypt(bytes(12), v['payload1'], b'')
    return msg == v['ciphertext0'] and transport == v['ciphertext1']


def tai64n(unix_ns):
    seconds, nanos = divmod(unix_ns, 10**9)
    return ((1 << 62) + seconds).to_bytes(8, 'big') + nanos.to_bytes(4, 'big')


def hello_prologue(v):
    """Spec section 14.2.2: what both sides bind into the transcript from the
    client's HELLO: "aftp", version, role, cipher count and list,
    max_datagram, the client's connection id."""
    ciphers = [CIPHERS[x] for x in v['hello_ciphers'].split()]
    return (b'aftp' + bytes([WIRE_VERSION, ROLES[v['hello_role']], len(ciphers)] + ciphers) +
            integer(v['hello_max_datagram']).to_bytes(2, 'big') +
            integer(v['client_conn_id']).to_bytes(4, 'big'))


def ack_payload(v):
    """Message 2's payload: the HELLO_ACK fields it authenticates, then the
    HELLO_ACK's extension TLVs other than HANDSHAKE, as they stand in it
    (ack_ext, spec section 14.2.3)."""
    return (integer(v['ack_server_conn_id']).to_bytes(4, 'big') +
            bytes([CIPHERS[v['ack_cipher']]]) + integer(v['ack_max_datagram']).to_bytes(2, 'big') +
            v.get('ack_ext', b''))


def handshake(v):
    """Runs both sides; returns the outputs of a handshake record."""
    v = dict(v, prologue=hello_prologue(v), response_payload=ack_payload(v))
    i_s, r_s, i_e, r_e, psk = (v[k] for k in ('initiator_static', 'responder_static',
                                              'initiator_ephemeral', 'responder_ephemeral', 'psk'))
    r_pub = public(r_s)
    # initiator, message 1: e, es, s, ss, psk, payload
    ini = Symmetric(v['prologue'], r_pub)
    msg1 = public(i_e)
    ini.mix_ephemeral(public(i_e))
    ini.mix_key(dh(i_e, r_pub))
    msg1 += ini.encrypt_and_hash(public(i_s))
    ini.mix_key(dh(i_s, r_pub))
    ini.mix_key_and_hash(psk)
    msg1 += ini.encrypt_and_hash(tai64n(v['timestamp_ns']) + v['init_payload'])
    # responder reads it
    res = Symmetric(v['prologue'], r_pub)
    res.mix_ephemeral(msg1[:32])
    res.mix_key(dh(r_s, msg1[:32]))
    client = res.decrypt_and_hash(msg1[32:80])
    res.mix_key(dh(r_s, client))
    res.mix_key_and_hash(psk)
    assert res.decrypt_and_hash(msg1[80:])[12:] == v['init_payload']
    # responder, message 2: e, ee, se, payload
    msg2 = public(r_e)
    res.mix_ephemeral(public(r_e))
    res.mix_key(dh(r_e, msg1[:32]))
    res.mix_key(dh(r_e, client))
    msg2 += res.encrypt_and_hash(v['response_payload'])
    # initiator reads it
    ini.mix_ephemeral(msg2[:32])
    ini.mix_key(dh(i_e, msg2[:32]))
    ini.mix_key(dh(i_s, msg2[:32]))
    assert ini.decrypt_and_hash(msg2[32:]) == v['response_payload']
    assert ini.h == res.h and ini.split() == res.split() and client == public(i_s)
    i2r, r2i = ini.split()
    return {'prologue': v['prologue'], 'response_payload': v['response_payload'],
            'initiator_public': public(i_s), 'responder_public': r_pub, 'msg1': msg1,
            'msg2': msg2, 'handshake_hash': ini.h, 'secret_i2r': i2r, 'secret_r2i': r2i}


def derive(secret, label):
    return hashlib.blake2b(label, key=secret, digest_size=32).digest()


def traffic(v):
    c = bytes([CIPHERS[v['cipher']]])
    return {'key': derive(v['secret'], b'aftp v1 key' + c),
            'iv': derive(v['secret'], b'aftp v1 iv' + c)[:12],
            'next_secret': derive(v['secret'], b'aftp v1 next')}


def sealed(v):
    plain, phase, ad_len = v['plain'], v['key_phase'], v['ad_len']
    flags = (int.from_bytes(plain[2:4], 'big') & ~3) | FLAG_PROTECTED | (FLAG_KEY_PHASE * phase)
    ad = plain[:2] + flags.to_bytes(2, 'big') + plain[4:ad_len]
    nonce = bytes(a ^ b for a, b in zip(v['iv'], bytes(4) + ad[8:16]))
    aead = AESGCM if v['cipher'] == 'AES256GCM' else ChaCha20Poly1305
    return {'sealed': ad + aead(v['key']).encrypt(nonce, plain[ad_len:], ad)}


KINDS = {
    'handshake': (handshake, ('initiator_static', 'responder_static', 'initiator_ephemeral',
                              'responder_ephemeral', 'psk', 'init_payload'), ('timestamp_ns',)),
    'traffic': (traffic, ('secret',), ()),
    'sealed': (sealed, ('key', 'iv', 'plain'), ('key_phase', 'ad_len')),
}


def outputs(record):
    compute, byte_keys, int_keys = KINDS[record['kind']]
    inputs = {k: byte_string(record[k]) for k in byte_keys}
    inputs.update({k: integer(record[k]) for k in int_keys})
    if 'ack_ext' in record:  # optional: the HELLO_ACK's other extensions
        inputs['ack_ext'] = byte_string(record['ack_ext'])
    # Names and lists are read by the kind that uses them.
    for key in ('cipher', 'hello_role', 'hello_ciphers', 'hello_max_datagram', 'client_conn_id',
                'ack_server_conn_id', 'ack_cipher', 'ack_max_datagram'):
        if key in record:
            inputs[key] = record[key]
    return compute(inputs)


def check(path):
    if not known_answer():
        print('FAIL the Noise known-answer test (Noise_N_25519_ChaChaPoly_BLAKE2b)')
        return 1
    failures = total = 0
    for line, record in read_records(path):
        total += 1
        for key, want in outputs(record).items():
            if key not in record or byte_string(record[key]) != want:
                print('FAIL %s:%d %s: %s should be %s' % (path, line, record['name'], key, want.hex()))
                failures += 1
    print('%d crypto vectors, %d failures' % (total, failures))
    return 1 if failures or total == 0 else 0


def wrap_hex(data, indent):
    chunks = [data[i:i + 32].hex() for i in range(0, len(data), 32)] or ['']
    return ('\n' + ' ' * indent).join(chunks)


def fill(path):
    """Reprints path with every output line recomputed (inputs untouched)."""
    text = open(path, encoding='utf-8').read()
    records = {r['name']: outputs(r) for _, r in read_records(path)}
    out, current, skipping = [], None, False
    for line in text.splitlines():
        if skipping and line[:1] in (' ', '\t'):
            continue
        skipping = False
        key = line.partition('=')[0].strip()
        if key == 'name':
            current = records[line.partition('=')[2].strip()]
        if current is not None and key in current and not line.startswith('#'):
            out.append('%s = %s' % (key, wrap_hex(current[key], len(key) + 3)))
            skipping = True
            continue
        out.append(line)
    sys.stdout.write('\n'.join(out) + '\n')
    return 0


if __name__ == '__main__':
    if len(sys.argv) != 3 or sys.argv[1] not in ('check', 'fill'):
        sys.exit(__doc__)
    sys.exit((check if sys.argv[1] == 'check' else fill)(sys.argv[2]))
