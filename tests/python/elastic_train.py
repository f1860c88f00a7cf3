#!/usr/bin/env python3
"""Elastic training with collective.torch under collectiverun --elastic (doc/recovery.md).

  collectiverun -np 4 --elastic --min-np 2 python3 elastic_train.py [--victim R]

A small classifier on fixed synthetic data; every step averages the gradients of a global
batch of 128 rows split over the ranks, so the result does not depend on how many ranks
there are. With --victim R, rank R kills itself (SIGKILL) in the middle of epoch 2; the
survivors restore the last commit, shrink, the launcher starts a replacement that joins
through grow and gets the state from rank 0, and the run goes on. Each rank prints its
final test accuracy; the parameters must be the same on every rank.
"""
import argparse
import os
import signal
import sys

import torch

import collective.torch as hvd

EPOCHS, BATCHES, GLOBAL_BATCH = 5, 16, 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--victim", type=int, default=-1)
    a = ap.parse_args()
    hvd.init()
    joiner = "COLL_JOIN_ID" in os.environ
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(EPOCHS * BATCHES * GLOBAL_BATCH // 4 + 1024, 20, generator=g)
    w = torch.randn(20, 4, generator=g)
    y = (x @ w).argmax(1)
    x_test, y_test = x[-1024:], y[-1024:]
    n_train = x.shape[0] - 1024
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    state = hvd.elastic.TorchState(model, opt, epoch=0, batch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    victim = not joiner and hvd.rank() == a.victim

    @hvd.elastic.run
    def train(state):
        while state.epoch < EPOCHS:
            while state.batch < BATCHES:
                if victim and state.epoch == 2 and state.batch == 5:
                    os.kill(os.getpid(), signal.SIGKILL)
                r, n = hvd.rank(), hvd.size()
                base = ((state.epoch * BATCHES + state.batch) * GLOBAL_BATCH) % (n_train - GLOBAL_BATCH)
                lo, hi = base + r * GLOBAL_BATCH // n, base + (r + 1) * GLOBAL_BATCH // n
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x[lo:hi]), y[lo:hi], reduction="sum")
                loss.backward()
                for i, p in enumerate(model.parameters()):
                    p.grad.copy_(hvd.allreduce(p.grad, op=hvd.Sum, name="grad.%d" % i) / GLOBAL_BATCH)
                opt.step()
                state.batch += 1
                if state.batch % 4 == 0:
                    state.commit()
            state.batch = 0
            state.epoch += 1
            state.commit()

    train(state)
    with torch.no_grad():
        acc = (model(x_test).argmax(1) == y_test).float().mean().item()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    same = torch.equal(hvd.allreduce(flat, op=hvd.Max, name="final.max"),
                       hvd.allreduce(flat, op=hvd.Min, name="final.min"))
    print("rank %d of %d: accuracy %.4f, resets %s, joiner %s, parameters %s" %
          (hvd.rank(), hvd.size(), acc, resets, joiner, "same" if same else "DIFFER"), flush=True)
    hvd.shutdown()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
