"""DDP step time on the "collective" torch.distributed backend against Gloo, in one job:
both process groups live side by side (the default group is ours, a new_group(backend=
"gloo") beside it) and the rounds alternate ours, Gloo, ours, Gloo. Two models:

  cnn     the reference Fashion-MNIST CNN (tests/python/c10d_cases.py's), batches of
          --batch (64) random 28x28 images per rank: forward, backward (DDP's bucket all-reduces
          overlap it), SGD step
  resnet  the ResNet-50 gradient set (../shared/data/resnet50_gradients.tsv: 161 float32
          tensors, 97.5 MiB): a module with parameters of those shapes whose backward
          yields one gradient per parameter at once, so a step is DDP's bucketed
          all-reduce of ResNet-50's gradients and little else

Prints per model the median step time of each backend per round and Gloo's / ours (> 1:
ours is faster) as min / median / max over the rounds.

    collectiverun -np 2 /usr/bin/python3 perf/torch_c10d_ddp_bench.py [--rounds 5]
        [--steps 20] [--batch 64] [--models cnn,resnet] [--tsv FILE]

Needs collective.distributed importable (PYTHONPATH=python, COLL_C10D_MODULE=<build>/
python/_c10d*.so in a build tree).
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import collective.distributed as cdist

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(torch.nn.Module):
    """The reference Fashion-MNIST CNN, on 28x28 single-channel images."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = torch.nn.Linear(16 * 7 * 7, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class Gradients(torch.nn.Module):
    """Parameters of the given shapes; the loss sum(p * 1e-3) gives each gradient 1e-3."""

    def __init__(self, shapes):
        super().__init__()
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(s)) for s in shapes])

    def forward(self, x):
        return sum((p * x).sum() for p in self.ps)


def read_shapes(tsv):
    shapes = []
    with open(tsv) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            _, shape, _ = line.rstrip("\n").split("\t")
            shapes.append([int(d) for d in shape.split("x")])
    # The file lists the gradients in the order backward produces them; parameters are
    # declared in forward order, as in the model.
    return list(reversed(shapes))


def step_fn(model_name, group, rank, tsv, batch):
    torch.manual_seed(0)
    if model_name == "cnn":
        model = Net()
        ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(batch, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)

        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        return step, lambda: None
    model = Gradients(read_shapes(tsv))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    scale = torch.tensor(1e-3)

    def step():
        for p in model.parameters():
            p.grad = None
        ddp(scale).backward()

    def check():
        for p in model.parameters():
            if not torch.allclose(p.grad, torch.full_like(p.grad, 1e-3)):
                raise SystemExit("resnet: an averaged gradient is not 1e-3")
    return step, check


def timed(step, steps, group):
    times = []
    for _ in range(steps):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    # The slower rank's time counts.
    t = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="images per rank and step (cnn)")
    ap.add_argument("--models", default="cnn,resnet")
    ap.add_argument("--tsv", default=os.path.join(HERE, "..", "..", "shared", "data", "resnet50_gradients.tsv"))
    args = ap.parse_args()
    for v in (args.rounds, args.steps, args.batch):
        if v < 1:
            ap.error("--rounds, --steps and --batch take whole numbers >= 1")
    models = args.models.split(",")
    for m in models:
        if m not in ("cnn", "resnet"):
            ap.error(f"--models: unknown model {m!r} (cnn, resnet)")
    if "resnet" in models and not os.path.exists(args.tsv):
        ap.error(f"--tsv: {args.tsv} not found")
    torch.set_num_threads(1)
    cdist.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        print(f"# {size} ranks, DDP, {args.rounds} interleaved rounds of {args.steps} steps, cnn batch {args.batch}; "
              f"step times in ms (median, slower rank); ratio = Gloo / ours", flush=True)
        print(f"{'model':>8} {'ours':>10} {'gloo':>10} {'ratio min':>10} {'median':>8} {'max':>8}", flush=True)
    for m in models:
        ours_step, ours_check = step_fn(m, None, rank, args.tsv, args.batch)
        gloo_step, gloo_check = step_fn(m, gloo, rank, args.tsv, args.batch)
        for _ in range(args.warmup):
            ours_step()
            gloo_step()
        ours, theirs = [], []
        for r in range(args.rounds):
            pair = [("ours", ours_step, None), ("gloo", gloo_step, gloo)]
            if r % 2:
                pair.reverse()
            for name, step, group in pair:
                (ours if name == "ours" else theirs).append(timed(step, args.steps, group))
        ours_check()
        gloo_check()
        ratios = sorted(t / o for o, t in zip(ours, theirs))
        if rank == 0:
            print(f"{m:>8} {statistics.median(ours) * 1e3:10.2f} {statistics.median(theirs) * 1e3:10.2f} "
                  f"{ratios[0]:10.2f} {statistics.median(ratios):8.2f} {ratios[-1]:8.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
