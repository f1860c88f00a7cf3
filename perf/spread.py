#!/usr/bin/env python3
"""Summary of repeated, interleaved all-reduce comparisons (perf/compare_allreduce.sh --repeat).

Each round directory (DIR/round1, DIR/round2, ...) holds one "size time busbw [inplace]"
table per program (ours.tsv, ompi.tsv, gloo.tsv, torch.tsv, ours_lat.tsv, ompi_lat.tsv).
Prints, per size: our out-of-place time min / median / max over the rounds and our
in-place median, each peer's time min / median / max, and the peer/ours time ratio of
each round (higher is better for us) as min / median / max; then the verdicts of the
all-reduce targets over all rounds.

A ratio is a paired figure: ours and the peer measured in the same round, one after the
other, so that a slow spell of the machine weighs on both.
"""
import argparse
import os
import statistics
import sys

BUSBW_FLOOR_SIZE = 1 << 20
BIG_SIZES = (64 << 20, 256 << 20)


def load(path):
    """{size: (time_us, inplace_us or None)} from one tsv file; {} when absent."""
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            a = line.split()
            if len(a) < 2:
                continue
            try:
                size, t = int(a[0]), float(a[1])
                inplace = float(a[3]) if len(a) >= 4 else None
            except ValueError:
                continue
            rows[size] = (t, inplace)
    return rows


def mmm(values):
    """'min / median / max' of a list, or '-'."""
    if not values:
        return "-"
    return "%s / %s / %s" % tuple(fmt(v) for v in (min(values), statistics.median(values), max(values)))


def fmt(v):
    return "%.2f" % v if v < 100 else "%.0f" % v


def busbw(size, us, nranks):
    return size / us / 1e3 * 2 * (nranks - 1) / nranks if us > 0 else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--memcpy", type=float, default=0.0, help="GB/s of one core's memcpy, same run")
    ap.add_argument("--peers", default="ompi gloo")
    ap.add_argument("--lat-iters", type=int, default=0)
    ap.add_argument("--floor", type=float, default=1.5,
                    help="lowest peer/ours ratio allowed in any round at sizes >= 1 MiB")
    ap.add_argument("--strict", action="store_true", help="exit 3 when a verdict fails")
    args = ap.parse_args()
    peers = args.peers.split()
    rounds = [os.path.join(args.dir, "round%d" % r) for r in range(1, args.rounds + 1)]
    data = {name: [load(os.path.join(d, name + ".tsv")) for d in rounds]
            for name in ["ours", "ours_lat", "ompi_lat"] + peers}
    sizes = sorted(set().union(*[set(r) for r in data["ours"]]))
    if not sizes:
        print("# spread: no result of ours in %s" % args.dir)
        return 1

    def times(name, size):
        return [r[size][0] for r in data[name] if size in r]

    def ratios(peer, size):
        return [p[size][0] / o[size][0] for o, p in zip(data["ours"], data[peer])
                if size in o and size in p and o[size][0] > 0]

    hdr = "%12s | %-24s %9s %6s" % ("size(B)", "ours us min/med/max", "in-pl us", "%mcpy")
    for q in peers:
        hdr += " | %-24s %-20s" % (q + " us min/med/max", "x " + q + " min/med/max")
    print(hdr)
    for s in sizes:
        ours = times("ours", s)
        inplace = [r[s][1] for r in data["ours"] if s in r and r[s][1] is not None]
        med = statistics.median(ours)
        mcpy = 100 * busbw(s, med, args.np) / args.memcpy if args.memcpy > 0 else 0
        row = "%12d | %-24s %9s %5.1f%%" % (s, mmm(ours), fmt(statistics.median(inplace)) if inplace else "-", mcpy)
        for q in peers:
            row += " | %-24s %-20s" % (mmm(times(q, s)), mmm(ratios(q, s)))
        print(row)

    missed = 0

    def verdict(ok, text):
        nonlocal missed
        if not ok:
            missed += 1
        print("# verdict: %s %s" % (text, "PASS" if ok else "FAIL"))

    for q in [p for p in peers if p != "torch"]:
        big = [s for s in sizes if s >= BUSBW_FLOOR_SIZE]
        worst = [(min(ratios(q, s)), s) for s in big if ratios(q, s)]
        if worst:
            lo, at = min(worst)
            verdict(lo >= args.floor, "every size >= 1 MiB vs %s in every round: lowest %.2fx at %d B (target >= %.2fx)"
                    % (q, lo, at, args.floor))
        for s in BIG_SIZES:
            r = ratios(q, s)
            if r:
                verdict(statistics.median(r) >= 2.0, "median at %d B vs %s: %.2fx (target >= 2x)" % (s, q, statistics.median(r)))
        spreads = []
        for s in big:
            o, p = times("ours", s), times(q, s)
            if len(o) > 1 and len(p) > 1 and min(o) > 0 and min(p) > 0:
                spreads.append((max(o) / min(o), max(p) / min(p), s))
        if spreads:
            wider = [x for x in spreads if x[0] > x[1]]
            verdict(not wider, "run-to-run spread (max/min) at sizes >= 1 MiB no wider than %s's: %s" % (
                q, "; ".join("%d B %.2f vs %.2f" % (s, a, b) for a, b, s in wider) if wider else "held at every size"))
    off = []
    for s in [s for s in sizes if s >= BUSBW_FLOOR_SIZE]:
        o = times("ours", s)
        ip = [r[s][1] for r in data["ours"] if s in r and r[s][1]]
        if o and ip:
            off.append((statistics.median(o) / statistics.median(ip), s))
    if off:
        worst, at = max(off)
        verdict(worst <= 1.10, "out-of-place median within 10%% of in-place at sizes >= 1 MiB: worst %.2fx at %d B" % (worst, at))
    if args.memcpy > 0:
        low = [(busbw(s, statistics.median(times("ours", s)), args.np) / (0.8 * args.memcpy), s)
               for s in sizes if s >= BUSBW_FLOOR_SIZE]
        if low:
            frac, at = min(low)
            verdict(frac >= 0.6, "busbw >= 60%% of the memory bound (0.8 x memcpy) at sizes >= 1 MiB: lowest %.0f%% at %d B"
                    % (100 * frac, at))
    ol, ml = times("ours_lat", 8), times("ompi_lat", 8)
    if ol and ml:
        a, b = statistics.median(ol), statistics.median(ml)
        verdict(a <= b, "8 B latency, own runs of %d calls: ours %s us, Open MPI %s us (min/med/max; target median <=)"
                % (args.lat_iters, mmm(ol), mmm(ml)))
    print("# verdict: %s" % ("%d target(s) missed" % missed if missed else "all targets met"))
    return 3 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
