#!/usr/bin/env python3
"""A receiver that lies, for the loopback tests (spec sections 5, 6, 9).

Speaks the unprotected protocol only (the sender runs with --cipher none):
answers HELLO with HELLO_ACK(NONE), FILE_OFFER with FILE_REPLY(NONE), and
then, by MODE:

  digest-lie      honest FEEDBACK every millisecond of DATA, but FILE_DONE
                  gets FILE_RESULT(NONE) with a zero digest: it claims a
                  file verified that it never checked.
  resend-forever  every millisecond of DATA gets a FEEDBACK listing every
                  block missing, and FILE_DONE no answer: it asks for the
                  whole file again and again.
  refuse-limit    every offer gets FILE_REPLY(LIMIT): FILE_REPLY carries no
                  reason, so the sender's message has only what it offered.

Usage: hostile_receiver.py MODE LOGFILE. Prints its UDP port on stdout,
then serves one session on 127.0.0.1 until the sender's CLOSE (written to
LOGFILE as "close ERROR REASON"), 10 s of silence or 30 s in all (so a
sender that never stops fails its test on its idle timeout, not on the
test's). LOGFILE also gets
"data N" with the DATA datagrams received. Python 3 standard library only.
"""
import socket
import struct
import sys
import time

VERSION = 1
HELLO, HELLO_ACK, FILE_OFFER, FILE_REPLY, DATA, FEEDBACK, FILE_DONE, FILE_RESULT, CLOSE = range(1, 10)
LIMIT = 13  # wire error (spec 11.1)
SERVER_ID = 0x5E6F7081
HEADER = struct.Struct(">BBHIQ")  # version, type, flags, conn_id, pn


def varint(v):
    """QUIC variable-length integer, shortest form (spec 3.3)."""
    if v < 1 << 6:
        return struct.pack(">B", v)
    if v < 1 << 14:
        return struct.pack(">H", v | 0x4000)
    if v < 1 << 30:
        return struct.pack(">I", v | 0x80000000)
    return struct.pack(">Q", v | 0xC000000000000000)


class Liar:
    def __init__(self, mode, log):
        self.mode = mode
        self.log = log
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.001)
        self.peer = None
        self.client_id = 0
        self.max_datagram = 1452
        self.pn = 0
        self.file_id = 0
        self.blocks = 0
        self.largest_pn = 0
        self.data = 0
        self.held = set()
        self.done = False
        self.next_feedback = 0.0

    def send(self, ptype, body):
        self.sock.sendto(HEADER.pack(VERSION, ptype, 0, self.client_id, self.pn) + body, self.peer)
        self.pn += 1

    def on_hello(self, body):
        # role u8, cipher_count u8, ciphers, max_datagram u16 (spec 6.2)
        count = body[1]
        (theirs,) = struct.unpack_from(">H", body, 2 + count)
        self.max_datagram = min(theirs, 1452)
        self.send(HELLO_ACK, struct.pack(">IBHH", SERVER_ID, 0, self.max_datagram, 0))

    def on_offer(self, body):
        # file_id u32, size u64, mtime i64, mode u32, block_size u32 (spec 6.4)
        self.file_id, size, _, _, block = struct.unpack_from(">IQqII", body)
        self.blocks = (size + block - 1) // block
        error = LIMIT if self.mode == "refuse-limit" else 0
        self.send(FILE_REPLY, struct.pack(">IH", self.file_id, error))

    def on_done(self):
        self.done = True
        if self.mode == "digest-lie":
            self.send(FILE_RESULT, struct.pack(">IH", self.file_id, 0) + bytes(16))

    def honest_window(self):
        """cum_block, scan_end and the missing ranges of what is held."""
        cum = 0
        while cum in self.held:
            cum += 1
        end = self.blocks if self.done else max(self.held, default=-1) + 1
        end = max(end, cum)
        ranges, b = [], cum
        while b < end:
            if b in self.held:
                b += 1
                continue
            start = b
            while b < end and b not in self.held:
                b += 1
            ranges.append((start, b - start))
        return cum, end, ranges

    def feedback(self):
        """Every millisecond of DATA (spec 6.7): resend-forever holds no
        block and lists them all missing; digest-lie tells the truth."""
        if self.data == 0 or time.monotonic() < self.next_feedback:
            return
        self.next_feedback = time.monotonic() + 0.001
        if self.mode == "resend-forever":
            cum, end, ranges, held = 0, self.blocks, [(0, self.blocks)], 0
        else:
            (cum, end, ranges), held = self.honest_window(), len(self.held)
        encoded, next_min = b"", cum
        for start, length in ranges:
            encoded += varint(start - next_min) + varint(length - 1)
            next_min = start + length + 1
        body = struct.pack(">IQIQQQQQQH", self.file_id, self.largest_pn, 0,
                           int(time.monotonic() * 1e6), self.data, held, cum, cum, end,
                           len(ranges))
        self.send(FEEDBACK, body + encoded)

    def on_packet(self, pkt, addr):
        if len(pkt) < HEADER.size:
            return False
        version, ptype, _, _, pn = HEADER.unpack_from(pkt)
        body = pkt[HEADER.size:]
        if ptype == HELLO:
            self.peer = addr
            self.client_id = HEADER.unpack_from(pkt)[3]
            self.on_hello(body)
        elif addr != self.peer:
            return False
        elif ptype == FILE_OFFER:
            self.on_offer(body)
        elif ptype == DATA:
            self.data += 1
            self.largest_pn = max(self.largest_pn, pn)
            self.held.add(struct.unpack_from(">Q", body, 4)[0])
        elif ptype == FILE_DONE:
            self.on_done()
        elif ptype == CLOSE:
            error, reason_len = struct.unpack_from(">HH", body)
            reason = body[4:4 + reason_len].decode("utf-8", "replace")
            self.log.write("close %d %s\n" % (error, reason))
            self.send(CLOSE, struct.pack(">HH", 0, 0))
            return True
        return False

    def serve(self):
        print(self.sock.getsockname()[1], flush=True)
        last = began = time.monotonic()
        while time.monotonic() - last < 10 and time.monotonic() - began < 30:
            try:
                pkt, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                self.feedback()
                continue
            last = time.monotonic()
            if self.on_packet(pkt, addr):
                break
            self.feedback()
        self.log.write("data %d\n" % self.data)


def main():
    modes = ("digest-lie", "resend-forever", "refuse-limit")
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        sys.exit("usage: hostile_receiver.py %s LOGFILE" % "|".join(modes))
    with open(sys.argv[2], "w") as log:
        Liar(sys.argv[1], log).serve()


if __name__ == "__main__":
    main()
