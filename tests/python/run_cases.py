#!/usr/bin/python3
"""Runs groups of collective.torch test cases in every rank of a job:

    collectiverun -np 2 /usr/bin/python3 run_cases.py ops errors training syncbn

Each group is a module cases_<group>.py whose functions named case_* run in file order,
each given a Ctx (hvd, rank, size). After each case the ranks compare outcomes, so that a
failure on one rank stops all of them instead of leaving the others waiting in a
collective. The group 'noinit' runs before init(); 'shutdown' last. Exit status: 0 all
passed, 1 a case failed, 77 torch is not importable (the test is skipped).
"""
import importlib
import os
import sys
import traceback

try:
    import torch
except ImportError as e:  # the test is skipped, not failed, where torch is missing
    print(f"skipped: cannot import torch ({e})", flush=True)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class Ctx:
    def __init__(self, hvd):
        self.hvd = hvd
        self.rank = hvd.rank() if hvd.is_initialized() else -1
        self.size = hvd.size() if hvd.is_initialized() else 0


def run_group(hvd, group):
    mod = importlib.import_module(f"cases_{group}")
    cases = [(n, f) for n, f in vars(mod).items() if n.startswith("case_") and callable(f)]
    cases.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
    failed = 0
    for name, fn in cases:
        ctx = Ctx(hvd)
        ok = True
        try:
            fn(ctx)
        except Exception:  # noqa: BLE001 -- reported, and every rank is told below
            ok = False
            print(f"[rank {ctx.rank}] FAIL {group}.{name}\n{traceback.format_exc()}", flush=True)
        if hvd.is_initialized() and group not in ("noinit", "shutdown"):
            flags = hvd.allgather(torch.tensor([0 if ok else 1], dtype=torch.int32),
                                  name=f"outcome.{group}.{name}")
            ok = ok and int(flags.sum()) == 0
            if not ok:
                bad = [r for r, f in enumerate(flags.tolist()) if f]
                print(f"[rank {ctx.rank}] {group}.{name} failed on rank(s) {bad}; stopping", flush=True)
                return False
        if ok and ctx.rank <= 0:
            print(f"ok {group}.{name}", flush=True)
        failed += not ok
    return failed == 0


def main():
    groups = sys.argv[1:]
    if not groups:
        sys.exit("usage: run_cases.py GROUP...")
    torch.set_num_threads(1)
    if "noinit" in groups:
        # Before collective.torch is imported: a library that cannot be loaded must give
        # an ImportError that says how to point at it.
        import cases_noinit
        cases_noinit.check_bad_library()
    import collective.torch as hvd
    ok = True
    for group in groups:
        if group != "noinit" and not hvd.is_initialized():
            hvd.init()
        ok = run_group(hvd, group) and ok
        if not ok:
            break
    if hvd.is_initialized():
        hvd.shutdown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
