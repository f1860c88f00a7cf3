#!/usr/bin/python3
"""collective.torch (DistributedOptimizer + SyncBatchNorm) against PyTorch DDP (gloo) on
the reference Fashion-MNIST model, the same data split, optimiser and global batch, in
one run, 1 thread per rank:

    perf/frontend/torch_hvd_fashion.py --build build [--ranks 2] [--epochs 2]
                                       [--compression none|fp16|int8|topk] [--no-sync-bn]

Prints each framework's seconds per epoch and test accuracy, the epoch-time ratio
(collective.torch / DDP) and one 'RESULT {json}' line. The DDP baseline is
torch_ddp_fashion.py (per-rank BatchNorm2d: torch 1.13's SyncBatchNorm needs CUDA), run
after ours; this script is also the per-rank worker ('--worker', under collectiverun).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def worker(args):
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, HERE)
    import torch_ddp_fashion as ref  # the same model, data loading and sampler
    import collective.torch as hvd

    torch.set_num_threads(1)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.manual_seed(args.seed)
    train_x, train_y = ref.load(args.data_dir, "train", args.train_limit)
    test_x, test_y = ref.load(args.data_dir, "t10k", args.test_limit)
    model = ref.make_model()
    if args.sync_bn:
        model = hvd.SyncBatchNorm.convert_sync_batchnorm(model)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    compression = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16,
                   "int8": hvd.Compression.int8, "topk": hvd.Compression.topk}[args.compression]
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=compression)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    local = args.batch_size // size
    per_rank = len(train_x) // size
    steps = (per_rank + local - 1) // local
    total_steps = args.epochs * steps
    done = 0
    seconds, accuracy = [], []
    for epoch in range(args.epochs):
        g = torch.Generator().manual_seed(args.seed * 1000 + epoch)
        order = torch.randperm(len(train_x), generator=g)[rank:per_rank * size:size]
        loss_sum, seen = 0.0, 0
        hvd.barrier()
        start = time.perf_counter()
        for s in range(steps):
            idx = order[s * local:(s + 1) * local]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            if args.lr_schedule == "cosine":
                for group in opt.param_groups:
                    group["lr"] = args.lr * 0.5 * (1 + math.cos(math.pi * done / total_steps))
            opt.step()
            done += 1
            loss_sum += loss.item() * len(idx)
            seen += len(idx)
        seconds.append(time.perf_counter() - start)
        totals = hvd.allreduce(torch.tensor([loss_sum, seen], dtype=torch.float64), op=hvd.Sum,
                               name="epoch.loss")
        model.eval()
        lo, hi = len(test_x) * rank // size, len(test_x) * (rank + 1) // size
        correct = 0
        with torch.no_grad():
            for b in range(lo, hi, 500):
                e = min(b + 500, hi)
                correct += (model(test_x[b:e]).argmax(1) == test_y[b:e]).sum().item()
        model.train()
        counts = hvd.allreduce(torch.tensor([correct, hi - lo], dtype=torch.float64), op=hvd.Sum,
                               name="epoch.accuracy")
        accuracy.append((counts[0] / counts[1]).item())
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs}: train loss {totals[0] / totals[1]:.4f}, "
                  f"test accuracy {100 * accuracy[-1]:.2f}%, {seconds[-1]:.2f} s", flush=True)
    if rank == 0:
        result = {"ranks": size, "global_batch": args.batch_size, "sync_bn": args.sync_bn,
                  "compression": args.compression,
                  "framework": f"collective.torch on torch {torch.__version__}",
                  "epoch_seconds": seconds, "test_accuracy": accuracy,
                  "mean_epoch_seconds": sum(seconds) / len(seconds),
                  "final_test_accuracy": accuracy[-1]}
        print("RESULT " + json.dumps(result), flush=True)
    hvd.shutdown()


def run(label, cmd, env, timeout):
    print(f"### {label}: {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    result = None
    for line in proc.stdout.splitlines():
        if "RESULT " in line:
            result = json.loads(line[line.index("RESULT ") + len("RESULT "):])
        elif "epoch" in line and "accuracy" in line:
            print("    " + line, flush=True)
    if proc.returncode != 0 or result is None:
        print(proc.stdout[-4000:], file=sys.stderr)
        raise SystemExit(f"{label} failed (exit {proc.returncode})")
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="meson build directory")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="global batch")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="cosine")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--compression", choices=["none", "fp16", "int8", "topk"], default="none")
    p.add_argument("--no-sync-bn", dest="sync_bn", action="store_false",
                   help="per-rank BatchNorm2d, as the DDP baseline")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--skip-ddp", action="store_true", help="only collective.torch")
    p.add_argument("--timeout", type=int, default=3600)
    args = p.parse_args()
    if args.batch_size % args.ranks:
        sys.exit(f"--batch-size {args.batch_size} is not a multiple of --ranks {args.ranks}")
    if args.worker:
        return worker(args)

    launcher = os.path.join(args.build, "src/launcher/collectiverun")
    library = os.path.join(args.build, "libcollective.so")
    for f in (launcher, library):
        if not os.path.exists(f):
            raise SystemExit(f"{f} not found: build first (ninja -C {args.build})")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               COLL_LIBRARY=os.path.abspath(library),
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    common = ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
              "--lr", str(args.lr), "--lr-schedule", args.lr_schedule, "--seed", str(args.seed)]
    for opt in ("train_limit", "test_limit"):
        if getattr(args, opt):
            common += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    ours_cmd = [launcher, "-np", str(args.ranks), "/usr/bin/python3", os.path.abspath(__file__),
                "--worker", "--data-dir", args.data_dir, "--compression", args.compression] + common
    if not args.sync_bn:
        ours_cmd.append("--no-sync-bn")
    label = (f"collective.torch, {args.ranks} ranks, "
             f"{'SyncBatchNorm' if args.sync_bn else 'per-rank BatchNorm'}, compression {args.compression}")
    ours = run(label, ours_cmd, env, args.timeout)
    results = {"collective_torch": ours}
    print(f"{label}: {ours['mean_epoch_seconds']:.2f} s/epoch, "
          f"test accuracy {100 * ours['final_test_accuracy']:.2f}%", flush=True)
    if not args.skip_ddp:
        ddp_cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_ddp_fashion.py"), "--ranks",
                   str(args.ranks), "--data-dir", args.data_dir, "--no-progress"] + common
        ddp = run(f"PyTorch DDP gloo, {args.ranks} ranks", ddp_cmd, env, args.timeout)
        results["ddp_gloo"] = ddp
        ratio = ours["mean_epoch_seconds"] / ddp["mean_epoch_seconds"]
        results["epoch_ratio_ours_over_ddp"] = ratio
        print(f"PyTorch DDP gloo, {args.ranks} ranks, per-rank BatchNorm: "
              f"{ddp['mean_epoch_seconds']:.2f} s/epoch, test accuracy "
              f"{100 * ddp['final_test_accuracy']:.2f}%", flush=True)
        print(f"epoch time collective.torch / DDP: {ratio:.3f}", flush=True)
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
