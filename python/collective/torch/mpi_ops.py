"""The collective operations, horovod.torch style.

Every operation has an asynchronous form returning a handle (an int) and a blocking form
(`synchronize(async_form(...))`). Until a handle is synchronized, this module holds the
tensors the engine reads or writes, so they stay alive whatever the caller drops.
"""
import ctypes
import functools
import itertools
import threading

import torch

from . import _lib
from .. import CollectiveError
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
Adasum = 7  # done in this package (see _adasum), not by the engine
_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product",
             SumReproducible: "SumReproducible", AverageReproducible: "AverageReproducible",
             Adasum: "Adasum"}

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
_noname = {}  # process set id -> number of unnamed calls made on it
_joins = {}  # process set id -> number of joins completed on it


def _name(name, what, process_set):
    """The name the engine sees. Unnamed calls get '<op>.noname.<n>', n counting the
    unnamed calls this process made on that process set, so that the same order of calls
    on every member gives the same names (whatever non-members do meanwhile)."""
    if name is None:
        key = process_set.process_set_id if isinstance(process_set, ProcessSet) else None
        with _handles_lock:
            n = _noname.get(key, 0)
            _noname[key] = n + 1
        _named(f"{what}.noname.{n}", process_set)
        return f"{what}.noname.{n}"
    if not isinstance(name, str):
        raise TypeError(f"{what}: name must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{what}: name must not be empty")
    _named(name, process_set)
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
        raise ValueError(f"{what}: op {op!r} is not one of Sum, Average, Min, Max, Product, "
                         "SumReproducible, AverageReproducible, Adasum")
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
    check(fn(*args, ctypes.byref(h)), submit=True)
    if _calls.stack:
        _calls.stack[-1]["submitted"] = True
    return h.value


# A call that fails on this rank before the engine took it (a bad argument here) would
# leave the other ranks waiting in theirs. So this rank submits a stand-in under the same
# name: an all-reduce of an empty uint8 tensor, which the others' call does not match, so
# theirs fails too (a mismatch naming what each rank submitted) and they can go on. Where
# every rank failed alike, the stand-ins match each other and end quietly. Not done for a
# name already in flight here (the refusal of a duplicate), which has its own operation.
class _Calls(threading.local):
    def __init__(self):
        super().__init__()
        self.stack = []


_calls = _Calls()
_stand_ins = []  # (handle, keep) of stand-ins not yet released
_STAND_IN_BYTE = (ctypes.c_uint8 * 1)()
_STAND_IN_SHAPE = (ctypes.c_int64 * 1)(0)


def _named(name, process_set):
    if _calls.stack:
        _calls.stack[-1]["name"] = name
        _calls.stack[-1]["ps"] = process_set


def _reap_stand_ins(wait=False):
    with _handles_lock:
        left = list(_stand_ins)
    for h in left:
        done = ctypes.c_int(1)
        if not wait:
            lib.collHvdPoll(h, ctypes.byref(done))
        if done.value:
            lib.collHvdWait(h)
            lib.collHvdRelease(h)
            with _handles_lock:
                _stand_ins.remove(h)


def _stand_in(name, process_set):
    if not isinstance(process_set, ProcessSet) or process_set.process_set_id is None:
        return
    if not lib.collHvdIsInitialized():
        return
    t = HvdTensor(ctypes.addressof(_STAND_IN_BYTE), _DTYPES[torch.uint8], 1, _STAND_IN_SHAPE,
                  _DEVICE_CPU, 0)
    h = ctypes.c_int64()
    if lib.collHvdAllreduceAsync(ctypes.byref(t), ctypes.byref(t), name.encode(), Sum, 1.0, 1.0,
                                 None, process_set.process_set_id, ctypes.byref(h)) == 0:
        with _handles_lock:
            _stand_ins.append(h.value)


def _collective_call(fn):
    """Wraps an asynchronous operation: a failure on this rank before the engine took the
    call submits the stand-in (see _Calls)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        frame = {"name": None, "ps": None, "submitted": False}
        _calls.stack.append(frame)
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError, NotImplementedError, CollectiveError) as e:
            duplicate = isinstance(e, CollectiveError) and e.code == _lib.INVALID_USAGE
            if frame["name"] is not None and not frame["submitted"] and not duplicate:
                _stand_in(frame["name"], frame["ps"])
            raise
        finally:
            _calls.stack.pop()
    return call


def _scale(x, what, arg):
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: {arg} must be a number, not {x!r}") from None


# ------------------------------------------------------------------ allreduce

def _integer_scaled(tensor, op, prescale_factor, postscale_factor, process_set, what, start):
    """Prescale and postscale of an integer tensor, as horovod does them: in float64,
    truncated back to the tensor's type (before the reduction, and after it with Average's
    1/size folded into the postscale). start(tensor, engine_op) submits the unscaled
    operation on the prescaled tensor and returns its handle."""
    pre = _scale(prescale_factor, what, "prescale_factor")
    post = _scale(postscale_factor, what, "postscale_factor")
    if pre != 1.0:
        tensor = (tensor.double() * pre).to(tensor.dtype)
    factor = post / process_set.size() if op == Average else post
    h = start(tensor, Sum if op == Average else op)

    def finish(outs):
        out = outs[0]
        if factor != 1.0:
            out.copy_((out.double() * factor).to(out.dtype))
        return out

    return _group_handle([h], finish)


def _wants_integer_scaling(tensor, prescale_factor, postscale_factor, what):
    return (not tensor.dtype.is_floating_point
            and (_scale(prescale_factor, what, "prescale_factor") != 1.0
                 or _scale(postscale_factor, what, "postscale_factor") != 1.0))


def _allreduce_async(tensor, output, result, name, op, prescale_factor, postscale_factor,
                     compression, process_set, what, name_given):
    if _wants_integer_scaling(tensor, prescale_factor, postscale_factor, what):
        def start(scaled, engine_op):
            if output is tensor and scaled is not tensor:  # in place: send the scaled values
                tensor.copy_(scaled)
                scaled = tensor
            return _allreduce_async(scaled, output, result, name, engine_op, 1.0, 1.0,
                                    compression, process_set, what, name_given)
        return _integer_scaled(tensor, op, prescale_factor, postscale_factor, process_set, what,
                               start)
    keep = [tensor, output]
    inp = _view(tensor, keep)
    out = inp if output is tensor else _view(output, keep)
    comp = _compression(compression, [tensor], name_given, what)
    h = _submit(lib.collHvdAllreduceAsync, ctypes.byref(inp), ctypes.byref(out), name.encode(),
                op, _scale(prescale_factor, what, "prescale_factor"),
                _scale(postscale_factor, what, "postscale_factor"), comp,
                _ps(process_set, what))
    return _register(h, _Pending(_ALLREDUCE, keep, result))


@_collective_call
def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set,
                    compression=Compression.none):
    """Starts an all-reduce into a new tensor; synchronize(handle) returns it."""
    what = "allreduce"
    if _op(average, op, what) == Adasum:
        return _adasum_async(tensor, name, prescale_factor, postscale_factor, process_set, None,
                             what)
    n, src = _input(tensor, what, name, process_set)
    op = _op(average, op, what)
    out = torch.empty(src.shape, dtype=src.dtype, device=src.device)
    return _allreduce_async(src, out, out, n, op, prescale_factor, postscale_factor,
                            compression, process_set, what, name is not None)


@_collective_call
def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set,
                     compression=Compression.none):
    """Starts an in-place all-reduce of a contiguous tensor."""
    what = "allreduce_"
    if _op(average, op, what) == Adasum:
        _check_inplace(tensor, what, name or "allreduce")
        return _adasum_async(tensor, name, prescale_factor, postscale_factor, process_set,
                             tensor.detach(), what)
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
    if not isinstance(compression, Compressor):  # horovod-style compress/decompress object
        comp = _python_compression(compression, "allreduce")
        t, ctx = comp.compress(tensor)
        return comp.decompress(allreduce(t, average, name, Compression.none, op, prescale_factor,
                                         postscale_factor, process_set), ctx)
    if _op(average, op, "allreduce") == Adasum:
        return _adasum(tensor, name, prescale_factor, postscale_factor, process_set)
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
    if op == Adasum:  # each tensor its own Adasum, as horovod
        for i, t in enumerate(tensors):
            (_check_inplace if inplace else _check_tensor)(t, what, f"{n}.{i}")
        return _group_handle([_adasum_async(t, f"{n}.{i}", prescale_factor, postscale_factor,
                                            process_set, t.detach() if inplace else None, what)
                              for i, t in enumerate(tensors)])
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


@_collective_call
def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set,
                            compression=Compression.none):
    """All-reduces a list of tensors as one fused operation into new tensors."""
    return _grouped_async(tensors, average, name, op, prescale_factor, postscale_factor,
                          process_set, compression, False, "grouped_allreduce")


@_collective_call
def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set,
                             compression=Compression.none):
    return _grouped_async(tensors, average, name, op, prescale_factor, postscale_factor,
                          process_set, compression, True, "grouped_allreduce_")


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """All-reduces a list of tensors as one fused operation into new tensors (differentiable
    for Sum and Average)."""
    if not isinstance(compression, Compressor) and isinstance(tensors, (list, tuple)):
        comp = _python_compression(compression, "grouped_allreduce")
        pairs = [comp.compress(t) for t in tensors]
        outs = grouped_allreduce([t for t, _ in pairs], average, name, Compression.none, op,
                                 prescale_factor, postscale_factor, process_set)
        return [comp.decompress(o, c) for o, (_, c) in zip(outs, pairs)]
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

def _root(root_rank, what, process_set):
    """The engine's root: root_rank is a global rank, as in horovod.torch, translated to
    its rank within the process set."""
    if isinstance(root_rank, bool) or not isinstance(root_rank, int):
        raise TypeError(f"{what}: root_rank must be an int, not {type(root_rank).__name__}")
    if not isinstance(process_set, ProcessSet) or process_set.process_set_id in (None, 0):
        return root_rank  # global set (or not a registered set: _ps() reports that)
    ranks = process_set.ranks
    if root_rank not in ranks:
        raise ValueError(f"{what}: root_rank {root_rank} is not a member of the process set "
                         f"{ranks} (root_rank is a global rank)")
    return ranks.index(root_rank)


@_collective_call
def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast of root_rank's tensor (a global rank, which must be in the process
    set) into a new tensor."""
    what = "broadcast"
    n, src = _input(tensor, what, name, process_set)
    out = torch.empty(src.shape, dtype=src.dtype, device=src.device)
    keep = [src, out]
    h = _submit(lib.collHvdBroadcastAsync, ctypes.byref(_view(src, keep)),
                ctypes.byref(_view(out, keep)), _root(root_rank, what, process_set), n.encode(),
                _ps(process_set, what))
    return _register(h, _Pending(_BROADCAST, keep, out))


@_collective_call
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
                _root(root_rank, what, process_set), n.encode(), _ps(process_set, what))
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

@_collective_call
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


@_collective_call
def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set,
                   _received_splits=False):
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
                raise ValueError(f"{what} '{n}': splits must be a 1-D int32/int64 tensor or a list "
                                 f"of ints, not a {splits.dim()}-D {splits.dtype} tensor")
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
                       set_size=set_size if splits is not None or _received_splits else 0)
    return _register(h, pending)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """All-to-all. Returns `(output, received_splits)` when `splits` is given (received_splits:
    an int64 tensor, the rows received from each rank), else the output alone.
    Differentiable: the gradient travels back by the all-to-all of the output's gradient
    with the received splits."""
    if _wants_grad(tensor):
        _require_init("alltoall")
        out, received = _autograd._AlltoallFn.apply(tensor, splits, name, process_set)
        return out if splits is None else (out, received)
    return synchronize(alltoall_async(tensor, splits, name, process_set))


@_collective_call
def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reduce-scatter: the reduction over ranks, of which this rank keeps its
    share of the first dimension (the first `dim0 % size` ranks get one more row)."""
    what = "reducescatter"
    n, src = _input(tensor, what, name, process_set)
    op = _op(None, op, what)
    if op == Adasum:
        raise NotImplementedError(f"{what} '{n}': Adasum is not supported by reducescatter "
                                  "(as in horovod)")
    if src.dim() == 0:
        raise ValueError(f"{what} '{n}': a 0-dim tensor has no first dimension to scatter "
                         "(as in horovod)")
    if _wants_integer_scaling(src, prescale_factor, postscale_factor, what):
        return _integer_scaled(src, op, prescale_factor, postscale_factor, process_set, what,
                               lambda t, engine_op: _reducescatter_submit(t, n, engine_op,
                                                                          1.0, 1.0, process_set))
    return _reducescatter_submit(src, n, op, prescale_factor, postscale_factor, process_set)


def _reducescatter_submit(src, n, op, prescale_factor, postscale_factor, process_set):
    what = "reducescatter"
    keep = [src]
    h = _submit(lib.collHvdReducescatterAsync, ctypes.byref(_view(src, keep)), n.encode(), op,
                _scale(prescale_factor, what, "prescale_factor"),
                _scale(postscale_factor, what, "postscale_factor"), _ps(process_set, what))
    return _register(h, _Pending(_REDUCESCATTER, keep, dtype=src.dtype, device=src.device))


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share of the reduction (see reducescatter_async). `compression` is
    applied here, as horovod.torch does (compress before, decompress after; fp16/bf16 cast
    floating-point tensors). Differentiable for Sum and Average, with horovod.torch's
    gradient: the all-gather of every rank's output gradient, times the set's size for
    Sum and times both scale factors."""
    comp = _python_compression(compression, "reducescatter")
    t, ctx = comp.compress(tensor)
    if _wants_grad(t) and _op(None, op, "reducescatter") in (Sum, Average):
        _require_init("reducescatter")
        out = _autograd._ReducescatterFn.apply(t, name, op, process_set, prescale_factor,
                                               postscale_factor)
    else:
        out = synchronize(reducescatter_async(t, name, op, process_set, prescale_factor,
                                              postscale_factor))
    return comp.decompress(out, ctx)


def _python_compression(compression, what):
    if not (callable(getattr(compression, "compress", None))
            and callable(getattr(compression, "decompress", None))):
        raise TypeError(f"{what}: compression must be one of Compression.* (or an object with "
                        f"compress and decompress), not {compression!r}")
    return compression


# ------------------------------------------------ grouped allgather / reducescatter

# A grouped handle (a negative int, apart from the engine's) stands for several engine
# handles; synchronize() returns finish(list of their outputs), by default that list.
_groups = {}
_group_ids = itertools.count(1)


def _group_handle(handles, finish=None):
    gid = -next(_group_ids)
    with _handles_lock:
        _groups[gid] = (list(handles), finish)
    return gid


def _tensor_list(tensors, what):
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{what}: expected a list of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{what}: the list of tensors is empty")
    return list(tensors)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts an all-gather of each tensor of a list (named `<name>.<i>`); synchronize()
    returns the list of outputs."""
    what = "grouped_allgather"
    _require_init(what)
    ts = _tensor_list(tensors, what)
    base = _name(name, what, process_set)
    return _group_handle([allgather_async(t, f"{base}.{i}", process_set) for i, t in enumerate(ts)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """The all-gather of each tensor of a list (differentiable, as allgather)."""
    if isinstance(tensors, (list, tuple)) and _wants_grad(*tensors):
        _require_init("grouped_allgather")
        return list(_autograd._GroupedAllgatherFn.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reduce-scatter of each tensor of a list (named `<name>.<i>`); synchronize()
    returns the list of outputs."""
    what = "grouped_reducescatter"
    _require_init(what)
    ts = _tensor_list(tensors, what)
    base = _name(name, what, process_set)
    return _group_handle([reducescatter_async(t, f"{base}.{i}", op, process_set,
                                              prescale_factor, postscale_factor)
                          for i, t in enumerate(ts)])


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """The reduce-scatter of each tensor of a list (compression and gradient as
    reducescatter)."""
    comp = _python_compression(compression, "grouped_reducescatter")
    ts = _tensor_list(tensors, "grouped_reducescatter")
    pairs = [comp.compress(t) for t in ts]
    ts = [t for t, _ in pairs]
    if _wants_grad(*ts) and _op(None, op, "grouped_reducescatter") in (Sum, Average):
        _require_init("grouped_reducescatter")
        outs = list(_autograd._GroupedReducescatterFn.apply(name, op, process_set,
                                                            prescale_factor, postscale_factor,
                                                            *ts))
    else:
        outs = synchronize(grouped_reducescatter_async(ts, name, op, process_set,
                                                       prescale_factor, postscale_factor))
    return [comp.decompress(o, c) for o, (_, c) in zip(outs, pairs)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """All-reduces a sparse COO tensor as horovod.torch does: all-gathers its indices and
    values (so the result may hold an index more than once; it sums on coalescing).
    Returns a function that waits and returns the sparse result (Average divides the
    values by the set's size)."""
    what = "sparse_allreduce"
    _require_init(what)
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise TypeError(f"{what}: expected a sparse COO tensor")
    op = _op(None, op, what)
    if op not in (Sum, Average):
        raise ValueError(f"{what}: op must be Sum or Average, not {_OP_NAMES[op]}")
    t = tensor
    base = _name(name, what, process_set)
    indices = allgather_async(t._indices().transpose(0, 1).contiguous(), f"{base}.indices",
                              process_set)
    values = allgather_async(t._values().contiguous(), f"{base}.values", process_set)

    def wait():
        v = synchronize(values)
        i = synchronize(indices)
        if op == Average:
            v = v / process_set.size()
        if i.dim() == 0 or v.dim() == 0:
            return t.new().resize_as_(t)
        return torch.sparse_coo_tensor(i.transpose(0, 1), v, t.size())

    return wait


# ------------------------------------------------------------ Adasum

def _adasum_pair(a, b):
    """Horovod's Adasum of two vectors (float64): each is scaled by 1 - a.b / (2 |x|^2)
    (left as it is where |x|^2 < 1e-8) and the two are added."""
    dot = torch.dot(a, b)
    an, bn = torch.dot(a, a), torch.dot(b, b)
    ac = 1.0 - dot / an * 0.5 if an >= 1e-8 else torch.tensor(1.0, dtype=a.dtype)
    bc = 1.0 - dot / bn * 0.5 if bn >= 1e-8 else torch.tensor(1.0, dtype=a.dtype)
    return ac * a + bc * b


def _adasum_combine(rows):
    """Horovod's order: rank r with rank r ^ d for d = 1, 2, 4, ..., the lower rank's vector
    first (a binary tree over the ranks)."""
    level = list(rows)
    while len(level) > 1:
        level = [_adasum_pair(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def _adasum_check(tensor, process_set, what):
    if process_set is not global_process_set and process_set.process_set_id != 0:
        raise NotImplementedError(f"{what}: Adasum does not support process sets other than the "
                                  "global one (as in horovod)")
    n = process_set.size()
    if n & (n - 1):
        raise NotImplementedError(f"{what}: Adasum needs a power-of-two number of ranks, not {n} "
                                  "(as in horovod)")
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"{what}: Adasum needs a floating-point tensor, not {tensor.dtype}")


def _adasum_async(tensor, name, prescale_factor, postscale_factor, process_set, out, what):
    """Adasum as horovod defines it, computed here from the all-gather of every rank's
    tensor: every rank combines the same data in the same order, so all get the same bits."""
    _require_init(what)
    n = _name(name, "allreduce", process_set)
    _check_tensor(tensor, what, n)
    _adasum_check(tensor, process_set, what)
    pre = _scale(prescale_factor, what, "prescale_factor")
    post = _scale(postscale_factor, what, "postscale_factor")
    flat = tensor.detach().reshape(1, -1).contiguous()
    h = allgather_async(flat, n, process_set)
    shape, dtype = tensor.shape, tensor.dtype

    def finish(outs):
        rows = outs[0].double() * pre
        result = (_adasum_combine(list(rows)) * post).to(dtype).reshape(shape)
        if out is None:
            return result
        out.copy_(result)
        return out

    return _group_handle([h], finish)


def _adasum(tensor, name, prescale_factor, postscale_factor, process_set):
    return synchronize(_adasum_async(tensor, name, prescale_factor, postscale_factor,
                                     process_set, None, "allreduce"))


# ------------------------------------------------------------ completion

def poll(handle):
    """True once the operation finished (successfully or not); never blocks."""
    if handle in _groups:
        return all(poll(h) for h in _groups[handle][0])
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
    if _stand_ins:
        _reap_stand_ins()
    with _handles_lock:
        group = _groups.pop(handle, None)
    if group is not None:
        outs, first_error = [], None
        handles, finish = group
        for h in handles:  # every member is finished before an error is raised
            try:
                outs.append(synchronize(h))
            except Exception as e:  # noqa: BLE001
                first_error = first_error or e
        if first_error is not None:
            raise first_error
        return finish(outs) if finish is not None else outs
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
        _groups.clear()
        _noname.clear()  # a new init() starts every rank's names afresh
        _joins.clear()
    for h in left:
        lib.collHvdWait(h)
        lib.collHvdRelease(h)
        with _handles_lock:
            _handles.pop(h, None)
    _reap_stand_ins(wait=True)


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
    psid = _ps(process_set, "join")
    check(lib.collHvdJoin(psid, ctypes.byref(last)), "join")
    # While a rank was joined the others may have made unnamed calls it did not (they
    # failed, or were all-reduces it took part in with zeros): every member continues
    # from the highest count of unnamed calls, so that generated names agree again.
    with _handles_lock:
        k = _joins.get(psid, 0)
        _joins[psid] = k + 1
        mine = _noname.get(psid, 0)
    count = torch.tensor([mine], dtype=torch.int64)
    allreduce_(count, op=Max, name=f"join.names.{k}", process_set=process_set)
    with _handles_lock:
        _noname[psid] = max(int(count.item()), _noname.get(psid, 0))
    return last.value


# ------------------------------------------------------------ autograd

def _wants_grad(*tensors):
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in tensors)


# The differentiable forms are in _autograd, which uses this module's functions.
from . import _autograd  # noqa: E402
