"""Gradient compression, done by the engine (not in Python).

    Compression.none                 no compression
    Compression.fp16, Compression.bf16
                                     the all-reduce travels in 16-bit floats
    Compression.int8(block_size=256, stochastic=True, error_feedback=True)
                                     8-bit integers with one float scale per block
    Compression.topk(density=0.01, error_feedback=True)
                                     only the largest `density` fraction of elements

`Compression.int8` and `Compression.topk` can also be passed uncalled (their defaults).
Each also has horovod.torch's `compress(tensor) -> (tensor, ctx)` and
`decompress(tensor, ctx)`: fp16 and bf16 cast floating-point tensors (and back), the
others return the tensor as it is (their work is done by the engine). Operations the
engine cannot compress (reducescatter) apply these; an object of another class with
`compress` and `decompress` is applied that way by every operation that takes one.
The engine compresses float32 tensors reduced with Sum or Average; collective.torch
sends tensors of other types uncompressed (as horovod's fp16 compressor leaves integer
tensors alone). Error feedback keeps a residual per tensor name, so it needs named
tensors (DistributedOptimizer names every gradient).
"""
import ctypes

import torch

from ._lib import HvdCompression

_NONE, _FP16, _BF16, _INT8, _TOPK = 0, 1, 2, 3, 4


class Compressor:
    """What the engine is told to do; immutable."""

    def __init__(self, kind, label, block_size=256, stochastic=True, density=0.01,
                 error_feedback=False):
        self.kind = kind
        self.label = label
        self.block_size = block_size
        self.stochastic = stochastic
        self.density = density
        self.error_feedback = error_feedback
        self._c = HvdCompression(kind, int(block_size), 1 if stochastic else 0, float(density),
                                 1 if error_feedback else 0)

    @property
    def is_none(self):
        return self.kind == _NONE

    def compress(self, tensor):
        """horovod.torch's interface: (the tensor as sent, what decompress needs)."""
        if not isinstance(tensor, torch.Tensor):
            return tensor, None  # the operation reports what it was given
        cast = {_FP16: torch.float16, _BF16: torch.bfloat16}.get(self.kind)
        if cast is not None and tensor.dtype.is_floating_point:
            return tensor.type(cast), tensor.dtype
        return tensor, tensor.dtype

    def decompress(self, tensor, ctx):
        if ctx is not None and ctx.is_floating_point and tensor.dtype != ctx:
            return tensor.type(ctx)
        return tensor

    def c_pointer(self):
        """A pointer for collHvd*Async, or None for no compression."""
        return None if self.kind == _NONE else ctypes.pointer(self._c)

    def __repr__(self):
        return f"Compression.{self.label}"


class _Parametrised(Compressor):
    """Compression.int8 / Compression.topk: usable as is, or called for other settings."""

    def __init__(self, factory):
        self._factory = factory
        base = factory()
        super().__init__(base.kind, base.label, base.block_size, base.stochastic, base.density,
                         base.error_feedback)

    def __call__(self, *args, **kwargs):
        return self._factory(*args, **kwargs)


def _int8(block_size=256, stochastic=True, error_feedback=True):
    if not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"Compression.int8: block_size must be a positive int, not {block_size!r}")
    return Compressor(_INT8, f"int8(block_size={block_size}, stochastic={bool(stochastic)}, "
                      f"error_feedback={bool(error_feedback)})", block_size=block_size,
                      stochastic=bool(stochastic), error_feedback=bool(error_feedback))


def _topk(density=0.01, error_feedback=True):
    if not 0.0 < float(density) <= 1.0:
        raise ValueError(f"Compression.topk: density must be in (0, 1], not {density!r}")
    return Compressor(_TOPK, f"topk(density={density}, error_feedback={bool(error_feedback)})",
                      density=float(density), error_feedback=bool(error_feedback))


class Compression:
    """The compressions an allreduce (and DistributedOptimizer) can ask the engine for."""
    none = Compressor(_NONE, "none")
    fp16 = Compressor(_FP16, "fp16")
    bf16 = Compressor(_BF16, "bf16")
    int8 = _Parametrised(_int8)
    topk = _Parametrised(_topk)


__all__ = ["Compression", "Compressor"]
