#!/usr/bin/python3
"""PyTorch DDP (gloo, CPU) baseline for train_fashion_mnist: the same model, optimiser,
global batch, data split and normalisation, one thread per rank.

    /usr/bin/python3 torch_ddp_fashion.py --ranks 2 --epochs 2

Prints per-epoch lines and one 'RESULT {json}' line in train_fashion_mnist's format.
torch 1.13's SyncBatchNorm runs on GPU tensors only, so the model uses BatchNorm2d with
per-rank statistics (DDP broadcasts rank 0's running statistics at every forward).
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

from ports import free_port

MEAN, STD = 0.2860, 0.3530  # the frontend's normalisation


def read_idx(path, dims):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    if magic != 0x0800 | dims:
        raise ValueError(f"{path}: IDX magic {magic:#x}")
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, split, limit):
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), 3)
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"), 1)
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
    return x.unsqueeze(1).contiguous(), torch.from_numpy(labels.astype(np.int64))


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def evaluate(model, x, y, rank, size):
    model.eval()
    lo, hi = len(x) * rank // size, len(x) * (rank + 1) // size
    correct = 0
    with torch.no_grad():
        for b in range(lo, hi, 500):
            e = min(b + 500, hi)
            correct += (model(x[b:e]).argmax(1) == y[b:e]).sum().item()
    counts = torch.tensor([correct, hi - lo], dtype=torch.float64)
    dist.all_reduce(counts)
    model.train()
    return (counts[0] / counts[1]).item()


def worker(rank, args, port):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.manual_seed(args.seed)
    train_x, train_y = load(args.data_dir, "train", args.train_limit)
    test_x, test_y = load(args.data_dir, "t10k", args.test_limit)
    model = nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    local = args.batch_size // args.ranks
    # Disjoint interleaved shards of one shared permutation, like the frontend's sampler.
    per_rank = len(train_x) // args.ranks
    total_steps = args.epochs * ((per_rank + local - 1) // local)
    done = 0
    seconds, accuracy = [], []
    for epoch in range(args.epochs):
        g = torch.Generator().manual_seed(args.seed * 1000 + epoch)
        order = torch.randperm(len(train_x), generator=g)[rank:per_rank * args.ranks:args.ranks]
        steps = (per_rank + local - 1) // local
        loss_sum, seen = 0.0, 0
        start = time.perf_counter()
        for s in range(steps):
            idx = order[s * local:(s + 1) * local]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            if args.lr_schedule == "cosine":  # the frontend's --lr-schedule cosine
                for group in opt.param_groups:
                    group["lr"] = args.lr * 0.5 * (1 + math.cos(math.pi * done / total_steps))
            opt.step()
            done += 1
            loss_sum += loss.item() * len(idx)
            seen += len(idx)
            if rank == 0 and args.progress and (s + 1) % max(1, steps // 4) == 0:
                el = time.perf_counter() - start
                print(f"epoch {epoch + 1}/{args.epochs} {s + 1}/{steps} "
                      f"{seen * args.ranks / el:.0f} img/s loss {loss_sum / seen:.4f}", flush=True)
        seconds.append(time.perf_counter() - start)
        totals = torch.tensor([loss_sum, seen], dtype=torch.float64)
        dist.all_reduce(totals)
        accuracy.append(evaluate(model, test_x, test_y, rank, args.ranks))
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs}: train loss {totals[0] / totals[1]:.4f}, "
                  f"test accuracy {100 * accuracy[-1]:.2f}%, {seconds[-1]:.2f} s", flush=True)
    if rank == 0:
        result = {"ranks": args.ranks, "global_batch": args.batch_size, "sync_bn": False,
                  "compression": "none", "framework": f"torch {torch.__version__} DDP gloo",
                  "epoch_seconds": seconds, "test_accuracy": accuracy,
                  "mean_epoch_seconds": sum(seconds) / len(seconds),
                  "final_test_accuracy": accuracy[-1]}
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="global batch")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="cosine")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--no-progress", dest="progress", action="store_false")
    args = p.parse_args()
    if args.batch_size % args.ranks:
        sys.exit(f"--batch-size {args.batch_size} is not a multiple of --ranks {args.ranks}")
    os.environ["OMP_NUM_THREADS"] = "1"
    mp.spawn(worker, args=(args, free_port()), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
