"""DistributedOptimizer: gradients all-reduced by the engine while backward still runs."""
import contextlib
import warnings

import torch

from .basics import ProcessSet, global_process_set
from .compression import Compression, Compressor
from .mpi_ops import Average, Sum, allreduce_async_, synchronize


class _DistributedMixin:
    """Put in front of the wrapped optimizer's class (see DistributedOptimizer)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, process_set):
        super().__init__(params)
        self._compression = compression
        self._op = op
        self._predivide = float(gradient_predivide_factor)
        self._process_set = process_set
        self._passes = backward_passes_per_step
        self._names = self._name_parameters(named_parameters)
        self._handles = {}  # param -> engine handle, or None while accumulating locally
        self._delay = {}  # param -> backward passes left before its all-reduce
        self._order = []  # params that take part, in optimizer order
        self._grad_accs = []  # keeps the accumulator nodes (and so their hooks) alive
        self._synchronized = False
        self._should_synchronize = True
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._order.append(p)
                    self._delay[p] = self._passes
                    self._hook(p)

    def _name_parameters(self, named_parameters):
        params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is None:
            return {p: f"grad.{gi}.{pi}" for gi, g in enumerate(self.param_groups)
                    for pi, p in enumerate(g["params"])}
        named = list(named_parameters)
        for item in named:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], torch.Tensor)):
                raise TypeError("DistributedOptimizer: named_parameters must be (str, tensor) pairs, "
                                "as model.named_parameters() gives")
        names = [n for n, _ in named]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"DistributedOptimizer: parameter names must be unique; repeated: {dup}")
        by_param = {p: f"grad.{n}" for n, p in named}
        unnamed = [i for i, p in enumerate(params) if p not in by_param]
        if unnamed:
            raise ValueError("DistributedOptimizer: named_parameters does not name every parameter "
                             f"of the optimizer (unnamed: positions {unnamed[:8]})")
        return {p: by_param[p] for p in params}

    def _hook(self, p):
        with torch.enable_grad():
            acc = p.expand_as(p).grad_fn.next_functions[0][0]  # p's AccumulateGrad node

        def on_grad_ready(*_):
            if self._handles.get(p) is not None:
                raise AssertionError(
                    f"the gradient of {self._names[p]!r} was computed more than "
                    f"backward_passes_per_step={self._passes} times before step() or "
                    "synchronize(); raise backward_passes_per_step to accumulate locally")
            self._delay[p] -= 1
            self._handles[p] = self._send(p) if self._delay[p] == 0 else None

        acc.register_hook(on_grad_ready)
        self._grad_accs.append(acc)

    def _send(self, p):
        if p.grad is None:  # another rank has a gradient for it: take part with zeros
            p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
        elif not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        pre, post = 1.0, 1.0
        if self._op == Average and self._predivide != 1.0:
            pre, post = 1.0 / self._predivide, self._predivide
        return allreduce_async_(p.grad, name=self._names[p], op=self._op, prescale_factor=pre,
                                postscale_factor=post, process_set=self._process_set,
                                compression=self._compression)

    def synchronize(self):
        """Waits for every gradient's all-reduce (sending those backward did not produce on
        this rank, and those still accumulating locally, now)."""
        for p in self._order:
            if self._handles.get(p) is None:
                self._handles[p] = self._send(p)
        first_error = None
        for p in self._order:
            try:
                synchronize(self._handles[p])
            except Exception as e:  # noqa: BLE001 -- wait for every handle, then raise
                first_error = first_error or e
        self._handles.clear()
        for p in self._order:
            self._delay[p] = self._passes
        self._synchronized = True
        if first_error is not None:
            raise first_error

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For `optimizer.synchronize(); clip gradients; with optimizer.skip_synchronize():
        optimizer.step()`."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() after optimizer.synchronize() without "
                              "optimizer.skip_synchronize(): the gradients are all-reduced again")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, set_to_none=False):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() between loss.backward() and "
                                 "optimizer.step() (or synchronize()) would discard gradients "
                                 "that are being all-reduced")
        return super().zero_grad(set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         process_set=global_process_set):
    """Wraps a torch optimizer so that each gradient is all-reduced (Average by default) by
    the engine as soon as backward produced it, and step() waits for them all first.

    The result is an instance of a subclass of the optimizer's class, sharing its
    param_groups (and state). `named_parameters` (model.named_parameters()) names the
    gradients (unique names; default: their position). With backward_passes_per_step=k
    gradients accumulate locally over k backward passes before one all-reduce (of their
    sum, as horovod does: scale the loss by 1/k for a mean). gradient_predivide_factor f
    (Average only) divides by f before the sum and by size/f after it."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"DistributedOptimizer wraps a torch.optim.Optimizer, not {type(optimizer).__name__}")
    if not isinstance(compression, Compressor):
        raise TypeError(f"DistributedOptimizer: compression must be one of Compression.*, not {compression!r}")
    if op not in (Average, Sum):
        raise ValueError(f"DistributedOptimizer: op must be Average or Sum, not {op!r}")
    if isinstance(backward_passes_per_step, bool) or not isinstance(backward_passes_per_step, int) \
            or backward_passes_per_step < 1:
        raise ValueError(f"DistributedOptimizer: backward_passes_per_step must be an int >= 1, "
                         f"not {backward_passes_per_step!r}")
    if float(gradient_predivide_factor) != 1.0 and op != Average:
        raise ValueError("DistributedOptimizer: gradient_predivide_factor needs op=Average")
    if not float(gradient_predivide_factor) > 0:
        raise ValueError(f"DistributedOptimizer: gradient_predivide_factor must be positive, "
                         f"not {gradient_predivide_factor!r}")
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"DistributedOptimizer: process_set must be a ProcessSet, not {process_set!r}")
    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedMixin, base), {"__module__": base.__module__})
    dist = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, process_set)
    dist.defaults = optimizer.defaults
    for p, s in optimizer.state.items():
        dist.state[p] = s
    return dist


__all__ = ["DistributedOptimizer"]
