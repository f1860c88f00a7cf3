"""DistributedOptimizer: gradients all-reduced by the engine while backward still runs."""
import contextlib
import warnings

import torch

from .basics import ProcessSet, global_process_set, size
from .compression import Compression, Compressor
from .mpi_ops import (Adasum, Average, Sum, allreduce_async_, sparse_allreduce_async,
                      synchronize)


class _DistributedMixin:
    """Put in front of the wrapped optimizer's class (see DistributedOptimizer)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, process_set, sparse_as_dense=False):
        super().__init__(params)
        self._compression = compression
        self._op = op
        self._predivide = float(gradient_predivide_factor)
        self._process_set = process_set
        self._passes = backward_passes_per_step
        self._sparse_as_dense = bool(sparse_as_dense)
        self._names = self._name_parameters(named_parameters)
        self._ctx = {}  # param -> what a horovod-style compressor's decompress needs
        self._handles = {}  # param -> engine handle, or None while accumulating locally
        self._delay = {}  # param -> backward passes left before its all-reduce
        self._order = []  # params that take part, in optimizer order
        self._grad_accs = []  # keeps the accumulator nodes (and so their hooks) alive
        self._synchronized = False
        self._should_synchronize = True
        # A rank outside the process set steps locally, as in horovod.
        self._local = not process_set.included()
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._order.append(p)
                    self._delay[p] = self._passes
                    if not self._local:
                        self._hook(p)

    # The attributes horovod's optimizer has and scripts read.
    @property
    def backward_passes_per_step(self):
        return self._passes

    @backward_passes_per_step.setter
    def backward_passes_per_step(self, passes):
        self.set_backward_passes_per_step(passes)

    def set_backward_passes_per_step(self, passes):
        if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
            raise ValueError(f"backward_passes_per_step must be an int >= 1, not {passes!r}")
        self._passes = passes
        for p in self._delay:
            self._delay[p] = passes

    @property
    def op(self):
        return self._op

    @property
    def gradient_predivide_factor(self):
        return self._predivide

    @property
    def sparse_as_dense(self):
        return self._sparse_as_dense

    @property
    def process_set(self):
        return self._process_set

    @property
    def compression(self):
        return self._compression

    @property
    def _parameter_names(self):
        """param -> name (horovod's mapping; the engine's names add a 'grad.' prefix)."""
        return {p: n[len("grad."):] for p, n in self._names.items()}

    def load_state_dict(self, *args, **kwargs):
        self._handles.clear()
        self._synchronized = False
        self._should_synchronize = True
        for p in self._delay:
            self._delay[p] = self._passes
        return super().load_state_dict(*args, **kwargs)

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
        if p.grad.is_sparse:
            if not self._sparse_as_dense:
                # horovod: the indices and values are all-gathered (sparse_allreduce_async)
                return sparse_allreduce_async(p.grad.coalesce(), name=self._names[p], op=self._op,
                                              process_set=self._process_set)
            tensor = p.grad.to_dense()
        elif not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
            tensor = p.grad
        else:
            tensor = p.grad
        compression = self._compression
        if not isinstance(compression, Compressor):  # horovod-style: compressed here
            tensor, self._ctx[p] = compression.compress(tensor)
            tensor = tensor.contiguous()
            compression = Compression.none
        pre, post = 1.0, 1.0
        if self._op == Average and self._predivide != 1.0:
            pre, post = 1.0 / self._predivide, self._predivide
        return allreduce_async_(tensor, name=self._names[p], op=self._op, prescale_factor=pre,
                                postscale_factor=post, process_set=self._process_set,
                                compression=compression)

    def _receive(self, p, handle):
        out = handle() if callable(handle) else synchronize(handle)
        if p in self._ctx:
            out = self._compression.decompress(out, self._ctx.pop(p))
        if p.grad.is_sparse:
            agg = out if out.is_sparse else out.to_sparse()
            p.grad.zero_().add_(agg)  # set_ does not take sparse tensors
        elif out is not p.grad:
            p.grad.copy_(out)

    def synchronize(self):
        """Waits for every gradient's all-reduce (sending those backward did not produce on
        this rank, and those still accumulating locally, now)."""
        if self._local:
            self._synchronized = True
            return
        for p in self._order:
            if self._handles.get(p) is None:
                self._handles[p] = self._send(p)
        first_error = None
        for p in self._order:
            try:
                self._receive(p, self._handles[p])
            except Exception as e:  # noqa: BLE001 -- wait for every handle, then raise
                first_error = first_error or e
        self._handles.clear()
        self._ctx.clear()
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
                # horovod's wording, which scripts and tests look for
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "after optimizer.synchronize(): the gradients are all-reduced "
                              "again")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, set_to_none=False):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() between loss.backward() and "
                                 "optimizer.step() (or synchronize()) would discard gradients "
                                 "that are being all-reduced")
        return super().zero_grad(set_to_none)


class _AdasumMixin(_DistributedMixin):
    """horovod's Adasum optimizer: as each gradient is ready, its parameter takes a local
    step; the step's delta is reduced with Adasum across ranks, and step() applies the
    combined delta to the parameter's value from before the local step."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._start = {p: torch.zeros_like(p, requires_grad=False) for p in self._order}

    def _send(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        stashed = [g["params"] for g in self.param_groups]
        for g in self.param_groups:  # step this parameter only
            g["params"] = [p] if any(p is q for q in g["params"]) else []
        try:
            self._start[p].copy_(p.detach())
            super(_DistributedMixin, self).step()
        finally:
            for g, ps in zip(self.param_groups, stashed):
                g["params"] = ps
        with torch.no_grad():
            p.sub_(self._start[p])  # p holds its delta until step()
        return allreduce_async_(p.data, name=self._names[p], op=Adasum,
                                process_set=self._process_set)

    def synchronize(self):
        pass

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise AssertionError("skip_synchronize() is not supported with op=Adasum (as in horovod)")

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._order:
            if self._handles.get(p) is None:
                self._handles[p] = self._send(p)
        first_error = None
        for p in self._order:
            try:
                synchronize(self._handles[p])
                with torch.no_grad():
                    self._start[p].add_(p)
                    p.copy_(self._start[p])
            except Exception as e:  # noqa: BLE001 -- wait for every handle, then raise
                first_error = first_error or e
            self._delay[p] = self._passes
        self._handles.clear()
        if first_error is not None:
            raise first_error
        return loss


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps a torch optimizer so that each gradient is all-reduced (Average by default) by
    the engine as soon as backward produced it, and step() waits for them all first.

    The result is an instance of a subclass of the optimizer's class, sharing its
    param_groups (and state). `named_parameters` (model.named_parameters()) names the
    gradients (unique names; default: their position). With backward_passes_per_step=k
    gradients accumulate locally over k backward passes before one all-reduce (of their
    sum, as horovod does: scale the loss by 1/k for a mean). gradient_predivide_factor f
    (Average only) divides by f before the sum and by size/f after it. Sparse gradients
    are all-gathered (sparse_allreduce_async), or all-reduced dense with sparse_as_dense.
    op=Adasum is horovod's Adasum optimizer (power-of-two ranks, global set only).
    `num_groups`/`groups` are checked and accepted; the engine's fusion groups the
    all-reduces itself. A rank outside `process_set` steps locally."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"DistributedOptimizer wraps a torch.optim.Optimizer, not {type(optimizer).__name__}")
    if not isinstance(compression, Compressor) and not (
            callable(getattr(compression, "compress", None))
            and callable(getattr(compression, "decompress", None))):
        raise TypeError(f"DistributedOptimizer: compression must be one of Compression.* (or an "
                        f"object with compress and decompress), not {compression!r}")
    if op not in (Average, Sum, Adasum):
        raise ValueError(f"DistributedOptimizer: op must be Average, Sum or Adasum, not {op!r}")
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
    if num_groups:
        warnings.warn("DistributedOptimizer: num_groups is deprecated; use groups", DeprecationWarning)
        groups = num_groups if groups is None else groups
    if groups is not None:
        if isinstance(groups, list):
            seen = set()
            for group in groups:
                for t in group:
                    if not isinstance(t, torch.Tensor):
                        raise ValueError("DistributedOptimizer: groups must consist of torch.Tensor")
                    if id(t) in seen:
                        raise ValueError("DistributedOptimizer: a parameter can only appear once in groups")
                    seen.add(id(t))
        elif isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
            raise ValueError("DistributedOptimizer: groups must be a positive int or a list of "
                             "lists of tensors")
    mixin = _DistributedMixin
    if op == Adasum and size() > 1:
        if process_set is not global_process_set:
            raise NotImplementedError("DistributedOptimizer: Adasum supports only the global "
                                      "process set (as in horovod)")
        n = size()
        if n & (n - 1):
            raise NotImplementedError(f"DistributedOptimizer: Adasum needs a power-of-two number "
                                      f"of ranks, not {n} (as in horovod)")
        mixin = _AdasumMixin
    elif op == Adasum:
        op = Sum  # one rank: the sum of one gradient, as horovod
    base = optimizer.__class__
    cls = type(base.__name__, (mixin, base), {"__module__": base.__module__})
    dist = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, process_set, sparse_as_dense)
    dist.defaults = optimizer.defaults
    for p, s in optimizer.state.items():
        dist.state[p] = s
    return dist


__all__ = ["DistributedOptimizer"]
