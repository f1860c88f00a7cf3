#!/usr/bin/python3
"""How many crossings of the inter-host link a ring all-reduce pays per call, from its
dependencies alone (no software costs), against the floor of any all-reduce: one.

The ring of hier_targets.sh's layout: n ranks, hosts of n/H ranks each, contiguous in ring
order, so that hop p -> p+1 crosses the link when p+1 starts a host. Blocks as Blocks::split
deals elements out (the first count % n blocks one more). Rank p sends block
(p - t) mod n at step t of 2(n-1): the first n-1 steps reduce, the rest copy. A block
with no elements sends nothing (algorithms/ring_task.cpp skips empty steps). A receive
completes one hop time after the send, a send leaves once the block's previous hop has
arrived and, while reducing, once the rank has its own input, which it has when its
previous call returned. "One call" starts every rank at 0; "back to back" starts each
rank's next call when its last one returned, as all_reduce_perf times it.

Floor: a rank of host A cannot finish call k before host B's input of call k reached it,
which B had only once its call k-1 was done, which needed A's input of call k-1; so calls
follow each other at least one crossing apart, whatever the algorithm.

  ring_bound.py [--ranks 4] [--hosts 2] [--local-hop 0.02]
"""
import argparse


def ring_time(n, hosts, local, counts, calls):
    per_host = n // hosts
    hop = [1.0 if (p + 1) % per_host == 0 else local for p in range(n)]  # hop p -> p+1
    blocks = [b for b in range(n) if counts[b] > 0]
    start = [0.0] * n
    for _ in range(calls):
        done = list(start)
        for b in blocks:
            t, p = start[b], b
            for step in range(2 * (n - 1)):
                t += hop[p]
                p = (p + 1) % n
                if step < n - 2:  # p reduces into what it sends at the next step
                    t = max(t, start[p])
                done[p] = max(done[p], t)
        start = done
    return max(start) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--local-hop", type=float, default=0.02, help="an intra-host hop, in crossings")
    a = ap.parse_args()
    n = a.ranks
    if a.hosts < 2 or n % a.hosts:
        ap.error("need two hosts or more, each with the same number of ranks")
    print(f"# {n} ranks on {a.hosts} hosts; crossings of the link per all-reduce call "
          f"(intra-host hop = {a.local_hop}); floor of any algorithm: 1")
    print(f"#{'elements':>9} {'one call':>9} {'back to back':>13}   ring / floor (one call, back to back)")
    for elems in sorted({1, 2, n // 2, n, 4 * n}):
        counts = [elems // n + (1 if b < elems % n else 0) for b in range(n)]
        one = ring_time(n, a.hosts, a.local_hop, counts, 1)
        b2b = ring_time(n, a.hosts, a.local_hop, counts, 400)
        print(f"{elems:>10} {one:>9.2f} {b2b:>13.2f}   {one:.2f}x, {b2b:.2f}x")


if __name__ == "__main__":
    main()
