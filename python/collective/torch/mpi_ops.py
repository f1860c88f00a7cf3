"""The collective operations, horovod.torch style.

Every operation has an asynchronous form returning a handle (an int) and a blocking form
(`synchronize(async_form(...))`). Until a handle is synchronized, this module holds the
tensors the engine reads or writes, so they stay alive whatever the caller drops.
"""
import ctypes
import itertools
import threading

import torch

from . import _lib
from ._lib import HvdTensor, check, lib
from .basics import ProcessSet, _require_init, global_process_set
from .compression import Compression, Compressor

# Reduction operations (collHvdOp_t).
Sum = 0
Average = 1
Min = 2
Max = 3
Product = 4
# Reproducible Sum and Average of floating tensors: the same bits whatever the algorithm,
# the fusion, the rank count (zero inputs aside) or which rank holds which input.
SumReproducible = 5
AverageReproducible = 6
_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product",
             SumReproducible: "SumReproducible", AverageReproducible: "AverageReproducible"}

# torch dtype -> collDataType_t (include/collective.h)
_DTYPES = {
    torch.int8: 0,
    torch.int16: 10,
    torch.uint8: 1,
    torch.int32: 2,
    torch.int64: 4,
    torch.float16: 6,
    torch.float32: 7,
    torch.float64: 8,
    torch.bfloat16: 9,
}
_DEVICE_CPU, _DEVICE_CUDA = 0, 1

_ALLREDUCE, _GROUPED, _BROADCAST, _ALLGATHER, _ALLTOALL, _REDUCESCATTER = range(6)


class _Pending:
    """What an in-flight handle needs: the tensors to keep alive, where its result goes."""
    __slots__ = ("kind", "keep", "output", "dtype", "device", "set_size")

    def __init__(self, kind, keep, output=None, dtype=None, device=None, set_size=0):
        self.kind = kind
        self.keep = keep
        self.output = output
        self.dtype = dtype
        self.device = device
        self.set_size = set_size


_handles = {}
_handles_lock = threading.Lock()
_noname = {}  # process set id -> counter of unnamed calls


def _name(name, what, process_set):
    """The name the engine sees. Unnamed calls get '<op>.noname.<n>', n counting the
    unnamed calls this process made on that process set, so that the same order of calls
    on every member gives the same names (whatever non-members do meanwhile)."""
    if name is None:
        key = process_set.process_set_id if isinstance(process_set, ProcessSet) else None
        with _handles_lock:
            counter = _noname.setdefault(key, itertools.count())
            n = next(counter)
        return f"{what}.noname.{n}"
    if not isinstance(name, str):
        raise TypeError(f"{what}: name must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{what}: name must not be empty")
    return name


def _check_tensor(tensor, what, name):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} '{name}': expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout != torch.strided:
        raise TypeError(f"{what} '{name}': {tensor.layout} tensors are not supported (dense only)")
    if tensor.dtype not in _DTYPES:
        supported = ", ".join(str(d) for d in _DTYPES)
        raise TypeError(f"{what} '{name}': dtype {tensor.dtype} is not supported (supported: {supported})")
    if tensor.dim() > _lib.COLL_HVD_MAX_DIMS:
        raise ValueError(f"{what} '{name}': {tensor.dim()} dimensions, at most {_lib.COLL_HVD_MAX_DIMS}")


def _check_inplace(tensor, what, name):
    _check_tensor(tensor, what, name)
    if not tensor.is_contiguous():
        raise ValueError(f"{what} '{name}': in-place operations need a contiguous tensor "
                         "(call .contiguous() and use the out-of-place form)")


def _input(tensor, what, name, process_set):
    """The checks every out-of-place form starts with; returns the engine's name for the
    call and a contiguous view of the input that autograd does not track."""
    _require_init(what)
    n = _name(name, what, process_set)
    _check_tensor(tensor, what, n)
    return n, tensor.detach().contiguous()


def _view(tensor, keep):
    """A collHvdTensor_t over a contiguous tensor; the shape array goes into `keep`."""
    shape = (ctypes.c_int64 * max(tensor.dim(), 1))(*tensor.shape)
    keep.append(shape)
    if tensor.device.type == "cuda":
        dev, idx = _DEVICE_CUDA, tensor.device.index or 0
    else:
        dev, idx = _DEVICE_CPU, 0
    return HvdTensor(tensor.data_ptr(), _DTYPES[tensor.dtype], tensor.dim(), shape, dev, idx)


def _op(average, op, what):
    if average is not None:
        if op is not None:
            raise ValueError(f"{what}: pass op or average, not both (average is deprecated)")
        return Average if average else Sum
    if op is None:
        return Average
    if op not in _OP_NAMES:
        raise ValueError(f"{what}: op {op!r} is not one of Sum, Average, Min, Max, Product, SumReproducible, AverageReproducible")
    return op


def _ps(process_set, what):
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"{what}: process_set must be a ProcessSet, not {type(process_set).__name__}")
    return process_set._id()


def _compression(compression, tensors, name_given, what):
    if not isinstance(compression, Compressor):
        raise TypeError(f"{what}: compression must be one of Compression.*, not {compression!r}")
    if compression.is_none or any(t.dtype != torch.float32 for t in tensors):
        return None  # only float32 tensors are compressed; others go as they are
    if compression.error_feedback and not name_given:
        raise ValueError(f"{what}: {compression!r} keeps a residual per tensor name; name the "
                         "tensor or turn error_feedback off")
    return compression.c_pointer()


def _register(handle, pending):
    with _handles_lock:
        _handles[handle] = pending
    return handle


def _submit(fn, *args):
    h = ctypes.c_int64()
    check(fn(*args, ctypes.byref(h)))
    return h.value


def _scale(x, what, arg):
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: {arg} must be a number, not {x!r}") from None


# ------------------------------------------------------------------ allreduce

def _allreduce_async(tensor, output, result, name, op, prescale_factor, postscale_factor,
                     compression, process_set, what, name_given):
    keep = [tensor, output]
    inp = _view(tensor, keep)
    out = inp if output is tensor else _view(output, keep)
    comp = _compression(compression, [tensor], name_given, what)
    h = _submit(lib.collHvdAllreduceAsync, ctypes.byref(inp), ctypes.byref(out), name.encode(),
                op, _scale(prescale_factor, what, "prescale_factor"),
                _scale(postscale_factor, what, "postscale_factor"), comp,
                _ps(process_set, what))
    return _register(h, _Pending(_ALLREDUCE, keep, result))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set,
                    compression=Compression.none):
    """Starts an all-reduce into a new tensor; synchronize(handle) returns it."""
    what = "allreduce"
    n, src = _input(tensor, what, name, process_set)
    op = _op(average, op, what)
    out = torch.empty(src.shape, dtype=src.dtype, device=src.device)
    return _allreduce_async(src, out, out, n, op, prescale_factor, postscale_factor,
                            compression, process_set, what, name is not None)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set,
                     compression=Compression.none):
    """Starts an in-place all-reduce of a contiguous tensor."""
    what = "allreduce_"
    _require_init(what)
    n = _name(name, "allreduce", process_set)
    _check_inplace(tensor, what, n)
    op = _op(average, op, what)
    t = tensor.detach()
    return _allreduce_async(t, t, tensor, n, op, prescale_factor, postscale_factor,
                            compression, process_set, what, name is not None)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """All-reduces `tensor` over the process set (Average by default) into a new tensor.
    `compression` is applied by the engine to float32 tensors (Sum and Average).
    Differentiable for Sum and Average: the gradient is all-reduced the same way."""
    if _wants_grad(tensor) and _op(average, op, "allreduce") in (Sum, Average):
        return _autograd._AllreduceFn.apply(tensor, name, _op(average, op, "allreduce"), prescale_factor,
                                  postscale_factor, process_set, compression)
    return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                       postscale_factor, process_set, compression))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set,
               compression=Compression.none):
    """In-place all-reduce; returns `tensor`."""
    synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor,
                                 process_set, compression))
    return tensor


def _grouped_async(tensors, average, name, op, prescale_factor, postscale_factor, process_set,
                   compression, inplace, what):
    _require_init(what)
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{what}: expected a list of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{what}: the list of tensors is empty")
    n = _name(name, "grouped_allreduce", process_set)
    op = _op(average, op, what)
    ins, outs = [], []
    for i, t in enumerate(tensors):
        if inplace:
            _check_inplace(t, what, f"{n}.{i}")
            ins.append(t.detach())
            outs.append(ins[-1])
        else:
            _check_tensor(t, what, f"{n}.{i}")
            ins.append(t.detach().contiguous())
            outs.append(torch.empty(ins[-1].shape, dtype=ins[-1].dtype, device=ins[-1].device))
    keep = ins + outs
    cin = (HvdTensor * len(ins))(*[_view(t, keep) for t in ins])
    cout = (HvdTensor * len(outs))(*[_view(t, keep) for t in outs])
    keep += [cin, cout]
    comp = _compression(compression, ins, name is not None, what)
    h = _submit(lib.collHvdGroupedAllreduceAsync, len(ins), cin, cout, n.encode(), op,
                _scale(prescale_factor, what, "prescale_factor"),
                _scale(postscale_factor, what, "postscale_factor"), comp, _ps(process_set, what))
    return _register(h, _Pending(_GROUPED, keep, list(tensors) if inplace else outs))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set,
                            compression=Compression.none):
    """All-reduces a list of tensors as one fused operation into new tensors."""
    return _grouped_async(tensors, average, name, op, prescale_factor, postscale_factor,
                          process_set, compression, False, "grouped_allreduce")


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set,
                             compression=Compression.none):
    return _grouped_async(tensors, average, name, op, prescale_factor, postscale_factor,
                          process_set, compression, True, "grouped_allreduce_")


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """All-reduces a list of tensors as one fused operation into new tensors (differentiable
    for Sum and Average)."""
    if (isinstance(tensors, (list, tuple)) and _wants_grad(*tensors)
            and _op(average, op, "grouped_allreduce") in (Sum, Average)):
        return list(_autograd._GroupedAllreduceFn.apply(name, _op(average, op, "grouped_allreduce"),
                                              prescale_factor, postscale_factor, process_set,
                                              compression, *tensors))
    return synchronize(grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                               postscale_factor, process_set, compression))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set,
                       compression=Compression.none):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set, compression))


# ------------------------------------------------------------------ broadcast

def _root(root_rank, what):
    if isinstance(root_rank, bool) or not isinstance(root_rank, int):
        raise TypeError(f"{what}: root_rank must be an int, not {type(root_rank).__name__}")
    return root_rank


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast of root_rank's tensor (rank within the process set) into a new tensor."""
    what = "broadcast"
    n, src = _input(tensor, what, name, process_set)
    out = torch.empty(src.shape, dtype=src.dtype, device=src.device)
    keep = [src, out]
    h = _submit(lib.collHvdBroadcastAsync, ctypes.byref(_view(src, keep)),
                ctypes.byref(_view(out, keep)), _root(root_rank, what), n.encode(),
                _ps(process_set, what))
    return _register(h, _Pending(_BROADCAST, keep, out))


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast of a contiguous tensor."""
    what = "broadcast_"
    _require_init(what)
    n = _name(name, "broadcast", process_set)
    _check_inplace(tensor, what, n)
    t = tensor.detach()
    keep = [t]
    v = _view(t, keep)
    h = _submit(lib.collHvdBroadcastAsync, ctypes.byref(v), ctypes.byref(v),
                _root(root_rank, what), n.encode(), _ps(process_set, what))
    return _register(h, _Pending(_BROADCAST, keep, tensor))


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor on every rank, in a new tensor. Differentiable: the root gets the
    sum of every rank's gradient, the other ranks zero."""
    if _wants_grad(tensor):
        return _autograd._BroadcastFn.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ------------------------------------------------ allgather, alltoall, reducescatter

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an all-gather: the output stacks every rank's tensor along the first
    dimension, which may differ per rank (the others must match)."""
    what = "allgather"
    n, src = _input(tensor, what, name, process_set)
    keep = [src]
    h = _submit(lib.collHvdAllgatherAsync, ctypes.byref(_view(src, keep)), n.encode(),
                _ps(process_set, what))
    return _register(h, _Pending(_ALLGATHER, keep, dtype=src.dtype, device=src.device))


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor stacked along the first dimension, in rank order. Differentiable:
    a rank's gradient is its rows of the sum of every rank's gradient."""
    if _wants_grad(tensor):
        return _autograd._AllgatherFn.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an all-to-all: splits[r] rows of `tensor` go to rank r (None: the first
    dimension split evenly). synchronize() returns (output, received_splits) when splits
    were given, else the output alone."""
    what = "alltoall"
    n, src = _input(tensor, what, name, process_set)
    keep = [src]
    if splits is None:
        csplits, nsplits = None, 0
    else:
        if isinstance(splits, torch.Tensor):
            if splits.dtype not in (torch.int32, torch.int64) or splits.dim() != 1:
                raise TypeError(f"{what} '{n}': splits must be a 1-D int32/int64 tensor or a list of ints")
            vals = splits.tolist()
        else:
            try:
                vals = [int(s) for s in splits]
            except (TypeError, ValueError):
                raise TypeError(f"{what} '{n}': splits must be a list of ints, not {splits!r}") from None
        nsplits = len(vals)
        csplits = (ctypes.c_int64 * max(nsplits, 1))(*vals)
        keep.append(csplits)
    psid = _ps(process_set, what)
    set_size = process_set.size()
    h = _submit(lib.collHvdAlltoallAsync, ctypes.byref(_view(src, keep)), csplits, nsplits,
                n.encode(), psid)
    pending = _Pending(_ALLTOALL, keep, dtype=src.dtype, device=src.device,
                       set_size=set_size if splits is not None else 0)
    return _register(h, pending)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """All-to-all. Returns `(output, received_splits)` when `splits` is given (received_splits:
    an int64 tensor, the rows received from each rank), else the output alone.
    Differentiable: the gradient travels back by the all-to-all of the output's gradient
    with the received splits."""
    if _wants_grad(tensor):
        out, received = _autograd._AlltoallFn.apply(tensor, splits, name, process_set)
        return out if splits is None else (out, received)
    return synchronize(alltoall_async(tensor, splits, name, process_set))


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reduce-scatter: the reduction over ranks, of which this rank keeps its
    share of the first dimension (the first `dim0 % size` ranks get one more row)."""
    what = "reducescatter"
    n, src = _input(tensor, what, name, process_set)
    op = _op(None, op, what)
    keep = [src]
    h = _submit(lib.collHvdReducescatterAsync, ctypes.byref(_view(src, keep)), n.encode(), op,
                _scale(prescale_factor, what, "prescale_factor"),
                _scale(postscale_factor, what, "postscale_factor"), _ps(process_set, what))
    return _register(h, _Pending(_REDUCESCATTER, keep, dtype=src.dtype, device=src.device))


def reducescatter(tensor, name=None, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share of the reduction (see reducescatter_async). Differentiable for Sum
    and Average: a rank's gradient is every rank's output gradient stacked in rank order
    (an all-gather), times the same scaling as the forward pass."""
    if _wants_grad(tensor) and _op(None, op, "reducescatter") in (Sum, Average):
        return _autograd._ReducescatterFn.apply(tensor, name, op, process_set, prescale_factor,
                                      postscale_factor)
    return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                           postscale_factor))


# ------------------------------------------------------------ completion

def poll(handle):
    """True once the operation finished (successfully or not); never blocks."""
    if handle not in _handles:
        raise ValueError(f"poll: unknown handle {handle!r} (already synchronized?)")
    done = ctypes.c_int()
    check(lib.collHvdPoll(handle, ctypes.byref(done)), "poll")
    return bool(done.value)


def _adopt(address, nbytes, dtype, shape):
    """A tensor over engine memory from collHvdOutputTake, without a copy: torch keeps the
    buffer object alive as long as any view of the tensor's storage, and the object frees
    the memory when it goes."""
    # Defaults bind what __del__ needs, so it still works while the interpreter exits.
    array = type("_EngineOutput", (ctypes.c_uint8 * nbytes,),
                 {"__del__": lambda self, free=lib.collHvdOutputFree, at=ctypes.addressof:
                  free(at(self))})
    return torch.frombuffer(array.from_address(address), dtype=torch.uint8).view(dtype).view(shape)


def _engine_output(handle, pending):
    ndim = ctypes.c_int()
    shape = (ctypes.c_int64 * _lib.COLL_HVD_MAX_DIMS)()
    check(lib.collHvdOutputShape(handle, ctypes.byref(ndim), shape), "synchronize")
    dims = [shape[i] for i in range(ndim.value)]
    # The engine makes these outputs in host memory; the tensor takes it over as it is.
    data = ctypes.c_void_p()
    check(lib.collHvdOutputTake(handle, ctypes.byref(data)), "synchronize")
    if data.value:
        nbytes = torch.Size(dims).numel() * torch.empty(0, dtype=pending.dtype).element_size()
        out = _adopt(data.value, nbytes, pending.dtype, dims)
    else:
        out = torch.empty(dims, dtype=pending.dtype)
    if pending.device.type != "cpu":
        out = out.to(pending.device)
    if pending.kind == _ALLTOALL and pending.set_size:
        splits = (ctypes.c_int64 * pending.set_size)()
        check(lib.collHvdReceivedSplits(handle, splits, pending.set_size), "synchronize")
        return out, torch.tensor(list(splits), dtype=torch.int64)
    return out


def synchronize(handle):
    """Waits for an async operation and returns its output (a tensor; a list for grouped
    allreduce; (output, received_splits) for alltoall with splits). Raises
    collective.CollectiveError when it failed. The handle is spent afterwards."""
    with _handles_lock:
        pending = _handles.get(handle)
    if pending is None:
        raise ValueError(f"synchronize: unknown handle {handle!r} (already synchronized?)")
    try:
        check(lib.collHvdWait(handle))  # ctypes lets go of the GIL while it waits
        if pending.kind in (_ALLGATHER, _ALLTOALL, _REDUCESCATTER):
            return _engine_output(handle, pending)
        return pending.output
    finally:
        lib.collHvdRelease(handle)
        with _handles_lock:
            _handles.pop(handle, None)


def _drain_handles():
    """After shutdown: waits for the handles nobody synchronized (they end, failed or not,
    once the engine stops) and releases them with the tensors they held."""
    with _handles_lock:
        left = list(_handles)
        _noname.clear()  # a new init() starts every rank's names afresh
    for h in left:
        lib.collHvdWait(h)
        lib.collHvdRelease(h)
        with _handles_lock:
            _handles.pop(h, None)


def barrier(process_set=global_process_set):
    """Returns once every rank of the process set called it."""
    _require_init("barrier")
    check(lib.collHvdBarrier(_ps(process_set, "barrier")), "barrier")


def join(device=-1, process_set=global_process_set):
    """This rank has no more data: until every rank joined, it takes part in the others'
    all-reduces (Sum, Average) with zeros. Returns the last rank to join. `device` is
    accepted for horovod compatibility and ignored (CPU)."""
    _require_init("join")
    last = ctypes.c_int(-1)
    check(lib.collHvdJoin(_ps(process_set, "join"), ctypes.byref(last)), "join")
    return last.value


# ------------------------------------------------------------ autograd

def _wants_grad(*tensors):
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in tensors)


# The differentiable forms are in _autograd, which uses this module's functions.
from . import _autograd  # noqa: E402
