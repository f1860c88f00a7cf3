"""Broadcasting model and optimizer state, and exchanging picklable objects."""
import io
import pickle

import torch

from .basics import _require_init, global_process_set, rank
from .mpi_ops import (_check_inplace, allgather, broadcast_, broadcast_async_, synchronize)


def broadcast_parameters(params, root_rank=0, process_set=global_process_set):
    """Overwrites every rank's tensors with root_rank's, in place: `params` is a state_dict
    (or any mapping of name -> tensor; done in sorted name order) or an iterable of
    (name, tensor) pairs (model.named_parameters()), in the same order on every rank."""
    _require_init("broadcast_parameters")
    if isinstance(params, dict):
        items = sorted(params.items())
    elif hasattr(params, "items"):
        items = sorted(params.items())
    else:
        items = list(params)
    seen = set()
    named = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError("broadcast_parameters: expected a state_dict or (name, tensor) pairs, "
                            f"got an item {type(item).__name__}")
        name, t = item
        if t is None:
            continue
        if name in seen:
            raise ValueError(f"broadcast_parameters: name {name!r} appears twice")
        seen.add(name)
        full = f"broadcast_parameters.{name}"
        data = t.data if isinstance(t, torch.nn.Parameter) else t
        _check_inplace(data, "broadcast_parameters", full)
        named.append((full, data))
    handles = [broadcast_async_(t, root_rank, name=n, process_set=process_set) for n, t in named]
    errors = []
    for h in handles:
        try:
            synchronize(h)
        except Exception as e:  # noqa: BLE001 -- every handle is finished before raising
            errors.append(e)
    if errors:
        raise errors[0]


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` on every rank (pickled; the root returns its own object)."""
    _require_init("broadcast_object")
    name = name or "noname"  # the same on every rank, whatever each passes as obj
    ps_rank = rank()
    if ps_rank == root_rank:
        payload = _dumps(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name=f"broadcast_object.{name}.size", process_set=process_set)
    if ps_rank != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name=f"broadcast_object.{name}.data", process_set=process_set)
    if ps_rank == root_rank:
        return obj
    return _loads(payload)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj` (pickled), in rank order."""
    _require_init("allgather_object")
    name = name or "noname"
    payload = _dumps(obj)
    sizes = allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                      name=f"allgather_object.{name}.size", process_set=process_set)
    data = allgather(payload, name=f"allgather_object.{name}.data", process_set=process_set)
    out, off = [], 0
    for n in sizes.tolist():
        out.append(_loads(data[off:off + n]))
        off += n
    return out


def broadcast_optimizer_state(optimizer, root_rank=0, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state (hyper-parameters of each group and per-parameter
    state such as momentum buffers) root_rank's. The ranks' optimizers must hold the same
    parameters in the same order. As horovod does, an optimizer with no state yet first
    takes a step with zero gradients (on every rank, so the state exists everywhere):
    parameters that require a gradient and have none get a zero one (sparse for
    SparseAdam, and for the sparse embeddings of `model` under SGD); the others keep none."""
    _require_init("broadcast_optimizer_state")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("broadcast_optimizer_state expects a torch.optim.Optimizer, "
                        f"not {type(optimizer).__name__}")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state: cannot broadcast torch.optim.LBFGS state "
                         "(as in horovod)")
    if len(optimizer.state_dict()["state"]) == 0:
        sparse = set()
        if model is not None:
            for m in model.modules():
                if isinstance(m, torch.nn.Embedding) and m.sparse:
                    sparse.update(id(p) for p in m.parameters())
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p.data)
                    if isinstance(optimizer, torch.optim.SparseAdam) or \
                            (isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                        p.grad = p.grad.to_sparse()
        from .optimizer import _DistributedMixin  # late: optimizer imports this module's peers
        if isinstance(optimizer, _DistributedMixin):
            super(_DistributedMixin, optimizer).step()  # the local step, no all-reduce
        else:
            optimizer.step()
    ps_rank = rank()
    state = optimizer.state_dict() if ps_rank == root_rank else None
    state = broadcast_object(state, root_rank, name="optimizer_state", process_set=process_set)
    if ps_rank != root_rank:
        optimizer.load_state_dict(state)


def _dumps(obj):
    buf = io.BytesIO()
    torch.save(obj, buf, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _loads(payload):
    return torch.load(io.BytesIO(payload.numpy().tobytes()), map_location="cpu")


__all__ = ["broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
           "allgather_object"]
