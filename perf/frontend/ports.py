"""A TCP port free on the loopback right now, for the rendezvous of the torch.distributed
side of the benchmarks in this folder (which run as scripts, so this folder is on
sys.path)."""
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
