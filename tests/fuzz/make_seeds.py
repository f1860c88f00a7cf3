#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus (valid messages of each format, so the
fuzzers start from inputs that get deep). Run from the repository root; the files are
kept in the tree, with regression inputs of fixed findings beside them."""
import hashlib
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def s(b):
    return u32(len(b)) + b


# --- unique id: magic, version, secret[32], family u16, port u16, addr[16], scope, nonce, sum
def unique_id(family, port, addr, scope=0, nonce=7):
    body = u32(0x434F4C4C) + u32(2) + bytes(range(32)) + struct.pack("<HH", family, port)
    body += addr.ljust(16, b"\0") + u32(scope) + u64(nonce)
    return body + hashlib.sha256(body).digest()[:4]


put("unique_id", "ipv4", b"\x00" + unique_id(4, 29500, bytes([127, 0, 0, 1])))
put("unique_id", "ipv6", b"\x00" + unique_id(6, 40000, b"\0" * 15 + b"\1", scope=2))
put("unique_id", "fixsum", b"\x01" + unique_id(4, 1, bytes([10, 0, 0, 2]))[:72])

# --- bootstrap frames: type u32 | length u64 | payload; byte 0 picks nranks (1 + b % 9)
def frame(t, payload):
    return u32(t) + u64(len(payload)) + payload


hello = u32(1) + u32(4) + u32(1234) + s(b"host:boot") + s(b"host")
peers = u32(2) + (u32(100) + s(b"h:b") + s(b"h")) * 2
put("bootstrap", "hello", b"\x03" + hello)
put("bootstrap", "welcome", b"\x01" + frame(1, peers))
put("bootstrap", "rounds", b"\x03" + frame(3, b"abcdabcdabcdabcd") + frame(4, u32(2) + s(b"rank 2 died"))
    + frame(5, u32(5) + s(b"timed out")) + frame(8, s(b"3 of 4 ranks joined; missing ranks: 2")))
put("bootstrap", "contribute", b"\x04" + frame(2, u32(1) + b"xyz") + frame(6, s(b"bye")) + frame(7, b""))

# --- handshake: byte 0 bit 0 = fix the MAC, bit 1 = tcp role; then header (64 B) + hello
def client_header(role, hello_len):
    return u32(0x434F4C4C) + u32(2) + u32(role) + bytes(16) + bytes(32) + u32(hello_len)


put("handshake", "bootstrap-ok", b"\x01" + client_header(1, len(hello)) + hello)
put("handshake", "tcp-ok", b"\x03" + client_header(2, 16) + u32(0) + u32(0) + u32(1) + u32(0))
put("handshake", "wrong-mac", b"\x00" + client_header(1, 0))
put("handshake", "huge-hello", b"\x01" + client_header(1, 1 << 20))

# --- engine negotiation: magic "CENG", count, then per request the fields of writeMeta
def meta(name, op=0, shape=(4, 2), group=b"", splits=(), ranks=()):
    b = s(name) + bytes([op]) + struct.pack("<i", 7) + u32(len(shape)) + b"".join(struct.pack("<q", x) for x in shape)
    b += struct.pack("<ii", 0, 0) + struct.pack("<dd", 1.0, 1.0) + bytes([0, 0, 0]) + struct.pack("<i", 0)
    b += struct.pack("<d", 0.0) + struct.pack("<i", -1) + s(group) + struct.pack("<i", 0)
    b += u32(len(splits)) + b"".join(struct.pack("<q", x) for x in splits)
    b += u32(len(ranks)) + b"".join(struct.pack("<i", x) for x in ranks)
    return b


put("engine_wire", "one", u32(0x43454E47) + u32(1) + meta(b"grad.w"))
put("engine_wire", "three", u32(0x43454E47) + u32(3) + meta(b"a") + meta(b"b", op=2, splits=(1, 3))
    + meta(b"c", group=b"g", ranks=(0, 1)))
put("engine_wire", "empty", u32(0x43454E47) + u32(0))

# --- tcp link: streams/chunk byte, receives byte, unit byte; then headers and payloads
def wire(seq, n, call=0):
    return u32(0x54435032) + u32(seq) + u64(n) + u64(call)


put("tcp_link", "one-msg", bytes([0, 0, 7]) + wire(0, 8) + b"ABCDEFGH")
put("tcp_link", "two-msgs", bytes([0, 1, 3]) + wire(0, 4) + b"abcd" + wire(1, 8) + b"01234567")
put("tcp_link", "bad-magic", bytes([0, 0, 7]) + b"\0" * 24 + b"x" * 8)

# --- tuner table: COLL_TUNER_TABLE strings
put("tuner_table", "example", b"allreduce:0-64K=rd;allreduce:64K-=hier;broadcast:1M-=chain")
put("tuner_table", "commas", b"reduce:1-2=ring,alltoall:0-=tree")
put("tuner_table", "big", b"allgather:18446744073709551615-=ring")

# --- ib wire: byte 0 bit 0 = handle (else reply); then a ConnInfo (transport/net/ib/ib_wire.hpp)
put("ib_wire", "zeros-handle", b"\x01" + bytes(64))
put("ib_wire", "magic-only", b"\x01" + u32(0x31424943) + struct.pack("<H", 2) + bytes(58))

# --- shm segment header: byte 0 picks the file size (index 4: 4096 + 2 * 4096)
hdr = u64(0x314D48534C4C4F43) + u32(5) + u32(64) + u64(4096) + u64(4096 + 2 * 4096) + u64(11) + u64(13)
put("shm_segment", "valid-4k-rings", b"\x04" + hdr)
put("shm_segment", "size-mismatch", b"\x05" + hdr)
put("shm_segment", "tiny", b"\x01" + hdr[:16])


def conn_info(kind, nqps=2):
    b = u32(0x31424943) + struct.pack("<HH", 2, 256) + u32(kind) + u32(nqps)
    b += b"".join(u32(100 + i) for i in range(16)) + b"".join(u32(7 + i) for i in range(16))
    b += u32(4096) + u32(16) + u64(65536) + struct.pack("<HBB", 1, 3, 1) + bytes(16) + bytes(4) + u64(99)
    b += b"mlx5_0:1".ljust(64, b"\0")
    assert len(b) == 256
    return b


put("ib_wire", "valid-handle", b"\x01" + conn_info(1))
put("ib_wire", "valid-reply", b"\x00" + conn_info(2, nqps=4))


# A side on two ports (COLL_IB_PORTS=2): the ConnPorts after the ConnInfo.
def conn_ports(qp_ports):
    b = u32(0x50424943) + struct.pack("<HH", 1, 172) + u32(max(qp_ports) + 1)
    b += bytes(qp_ports).ljust(16, b"\0")
    port = struct.pack("<HBB", 2, 3, 1) + bytes(16) + b"mlx5_1:1".ljust(28, b"\0")
    b += port + bytes(96)
    assert len(b) == 172
    return b


put("ib_wire", "valid-handle-two-ports", b"\x01" + conn_info(1, nqps=4) + conn_ports([0, 1, 0, 1]))


# --- ucx handle: byte 0 bit 0 = handle (else reply); then a WireBlob (plugins/net_ucx/ucx_wire.hpp)
def fnv1a(data, h=1469598103934665603):
    for c in data:
        h = ((h ^ c) * 1099511628211) & (2**64 - 1)
    return h


def ucx_blob(magic, token, addr):
    head = u32(magic) + struct.pack("<HH", 1, len(addr)) + u64(token)
    b = head + u64(fnv1a(addr, fnv1a(head))) + addr
    return b.ljust(512, b"\0")


addr = bytes((i * 7 + 3) & 0xFF for i in range(120))
put("ucx_handle", "valid-handle", b"\x01" + ucx_blob(0x55435848, 0x1234, addr))
put("ucx_handle", "valid-reply", b"\x00" + ucx_blob(0x55435852, 99, addr[:40]))
put("ucx_handle", "bad-checksum", b"\x01" + ucx_blob(0x55435848, 5, addr)[:30] + b"\xff" * 8)
put("ucx_handle", "zeros", b"\x01" + bytes(512))


# --- shm record header: byte 0 = receiver settings (bit 0 single-copy negotiated, bit 1 peer
# may write here, bit 2 receive reduces, bits 3-4 ring 4/8/16/64 KiB), u64 index, u64 ring
# position, u64 receive size, u64 call; then the header line (transport/shm/shm_record.hpp)
TAG_DATA, TAG_SINGLE, TAG_PUSH, TAG_WHOLE, TAG_STREAM = 0xC011DA7A, 0xC0115C01, 0xC0115C02, 0xC011DA7B, 0xC011DA7C


def shm_recv(flags, index, at, size, call=0):
    return bytes([flags]) + u64(index) + u64(at) + u64(size) + u64(call)


def shm_record(tag, seq, size, call=0, addr=0, region=(0, 0, 0, -1, 0), inline=b""):
    base, nbytes, ino, fd, gen = region
    line = u32(tag) + u32(seq) + u64(size) + u64(call)
    line += inline if inline else u64(addr) + u64(base) + u64(nbytes) + u64(ino) + struct.pack("<iI", fd, gen)
    return line.ljust(64, b"\0")


put("shm_record", "inline-data", shm_recv(0, 5, 320, 8, 77) + shm_record(TAG_DATA, 5, 8, 77, inline=b"ABCDEFGH"))
put("shm_record", "stream", shm_recv(0x08, 1, 0, 100000) + shm_record(TAG_STREAM, 1, 100000))
put("shm_record", "whole-wrapping", shm_recv(0, 7, 3 * 4096 - 128, 1000) + shm_record(TAG_WHOLE, 7, 1000))
put("shm_record", "single-in-region", shm_recv(0x03, (1 << 32) | 1, 64, 8192, 9)
    + shm_record(TAG_SINGLE, 1, 8192, 9, addr=0x101000, region=(0x100000, 16384, 12, 3, 1)))
put("shm_record", "push", shm_recv(0x0B, 2, 128, 1 << 20) + shm_record(TAG_PUSH, 2, 1 << 20, addr=0x7F0000000000))
put("shm_record", "wrong-seq", shm_recv(0, 5, 0, 8) + shm_record(TAG_DATA, 6, 8))
put("shm_record", "push-into-reduce", shm_recv(0x07, 0, 0, 4096) + shm_record(TAG_PUSH, 0, 4096, addr=0x1000))
put("shm_record", "whole-too-big", shm_recv(0x18, 3, 0, 65536) + shm_record(TAG_WHOLE, 3, 65536))
