"""Both ends of the netns_delay.sh check: round-trip times and an intact bulk transfer.

  netns_delay_peer.py serve ADDR PORT
  netns_delay_peer.py probe ADDR PORT DELAY_MS
"""
import hashlib
import socket
import sys
import time

BULK = 24 << 20


def recv_exact(c, n):
    buf = bytearray()
    while len(buf) < n:
        d = c.recv(min(1 << 20, n - len(buf)))
        if not d:
            raise SystemExit("connection closed early")
        buf += d
    return bytes(buf)


def serve(addr, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    s.settimeout(30)
    c, _ = s.accept()
    c.settimeout(30)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(10):
        c.sendall(recv_exact(c, 8))
    digest = hashlib.sha256(recv_exact(c, BULK)).digest()
    c.sendall(digest)
    c.close()


def probe(addr, port, delay_ms):
    deadline = time.time() + 20
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    c.settimeout(30)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for i in range(10):
        t = time.perf_counter()
        c.sendall(b"%08d" % i)
        assert recv_exact(c, 8) == b"%08d" % i
        rtts.append((time.perf_counter() - t) * 1e3)
    rtts.sort()
    med = rtts[len(rtts) // 2]
    print(f"round trip through the switch: min {rtts[0]:.2f} ms, median {med:.2f} ms "
          f"(two delays of {delay_ms} ms)")
    if not (2 * delay_ms <= rtts[0] and med <= 2 * delay_ms + 20):
        raise SystemExit(f"FAIL: round trip not about 2 x {delay_ms} ms")
    data = bytes((i * 2654435761 >> 13) & 0xFF for i in range(1 << 16)) * (BULK >> 16)
    t = time.perf_counter()
    c.sendall(data)
    got = recv_exact(c, 32)
    print(f"{BULK >> 20} MiB in {time.perf_counter() - t:.2f} s")
    if got != hashlib.sha256(data).digest():
        raise SystemExit("FAIL: the bulk transfer arrived corrupted")


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        probe(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
