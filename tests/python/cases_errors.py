"""Bad input gets a clear error, and the library stays usable."""
import torch


def expect(exc, fn, *args, match=(), **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        for m in (match if isinstance(match, tuple) else (match,)):
            assert m in str(e), f"{exc.__name__} without {m!r}: {e}"
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {exc.__name__}")


def case_not_a_tensor(ctx):
    hvd = ctx.hvd
    for fn in (hvd.allreduce, hvd.allreduce_, hvd.allgather, hvd.allreduce_async,
               hvd.reducescatter, hvd.alltoall):
        expect(TypeError, fn, [1.0, 2.0], match="torch.Tensor")
    expect(TypeError, hvd.broadcast, 3.0, 0, match="torch.Tensor")
    expect(TypeError, hvd.grouped_allreduce, torch.ones(2), match="list")
    expect(TypeError, hvd.grouped_allreduce, [torch.ones(2), "x"], match="torch.Tensor")
    expect(ValueError, hvd.grouped_allreduce, [], match="empty")


def case_bad_dtype(ctx):
    hvd = ctx.hvd
    for dtype in (torch.bool, torch.complex64, torch.complex128):
        t = torch.zeros(3, dtype=dtype)
        expect(TypeError, hvd.allreduce, t, match=str(dtype))
        expect(TypeError, hvd.broadcast_, t, 0, match=str(dtype))
        expect(TypeError, hvd.allgather, t, name="named", match=(str(dtype), "named"))
    expect(TypeError, hvd.allreduce, torch.zeros(3).to_sparse(), match="sparse")


def case_non_contiguous_in_place(ctx):
    hvd = ctx.hvd
    t = torch.zeros(4, 6).t()
    expect(ValueError, hvd.allreduce_, t, match="contiguous")
    expect(ValueError, hvd.allreduce_async_, t, match="contiguous")
    expect(ValueError, hvd.broadcast_, t, 0, match="contiguous")
    expect(ValueError, hvd.grouped_allreduce_, [torch.zeros(2), t], match="contiguous")


def case_bad_arguments(ctx):
    hvd = ctx.hvd
    t = torch.ones(4)
    expect(ValueError, hvd.allreduce, t, op=17, match="op")
    expect(ValueError, hvd.allreduce, t, average=True, op=hvd.Sum, match="average")
    # Refused by the engine before running: a CollectiveError that is also a ValueError,
    # as horovod raises ValueError there.
    e = expect(hvd.CollectiveError, hvd.broadcast, t, ctx.size, name="bad.root", match="bad.root")
    assert e.code == 1 and isinstance(e, ValueError), (e.code, type(e))  # collInvalidArgument
    for splits in ([1] * ctx.size, [5]):
        e = expect(ValueError, hvd.alltoall, torch.ones(5), splits=splits, match="splits")
        assert isinstance(e, hvd.CollectiveError), type(e)
    expect(TypeError, hvd.allreduce, t, name=3, match="name")
    expect(TypeError, hvd.allreduce, t, process_set=[0, 1], match="ProcessSet")
    expect(TypeError, hvd.allreduce, t, compression="fp16", match="compression")
    expect(ValueError, hvd.Compression.topk, density=0.0, match="density")
    expect(ValueError, hvd.synchronize, 123456789, match="unknown handle")
    # Still usable.
    assert hvd.allreduce(t, op=hvd.Sum, name="after.bad.args").tolist() == [ctx.size] * 4


def case_shape_mismatch_across_ranks(ctx):
    hvd = ctx.hvd
    t = torch.ones(3 + ctx.rank)  # a different shape on every rank
    e = expect(hvd.CollectiveError, hvd.allreduce, t, name="mismatched.tensor",
               match=("mismatched.tensor", "shape"))
    assert e.code == 2, e.code  # collInvalidUsage
    # The same with a pending handle, and with an allgather whose other dims differ.
    h = hvd.allreduce_async(torch.ones(2, dtype=torch.float32 if ctx.rank else torch.float64),
                            name="mismatched.dtype")
    expect(hvd.CollectiveError, hvd.synchronize, h, match="mismatched.dtype")
    expect(hvd.CollectiveError, hvd.allgather, torch.ones(2, 1 + ctx.rank), name="mismatched.ag",
           match="mismatched.ag")
    # The engine goes on: the next operations succeed, on every rank.
    for i in range(3):
        got = hvd.allreduce(torch.full((5,), float(ctx.rank)), op=hvd.Sum, name=f"after.mismatch.{i}")
        assert torch.all(got == sum(range(ctx.size))), got
    hvd.barrier()
