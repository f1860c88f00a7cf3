"""Before init(): loading errors, calls refused with ValueError. Run in a 1-rank job."""
import os
import sys

import torch


def check_bad_library():
    """COLL_LIBRARY naming a missing file: ImportError naming the variable."""
    saved = os.environ.get("COLL_LIBRARY")
    os.environ["COLL_LIBRARY"] = "/nonexistent/libcollective.so"
    try:
        import collective.torch  # noqa: F401
    except ImportError as e:
        assert "COLL_LIBRARY" in str(e) and "/nonexistent/libcollective.so" in str(e), str(e)
    else:
        raise AssertionError("import with a bad COLL_LIBRARY did not fail")
    finally:
        if saved is None:
            del os.environ["COLL_LIBRARY"]
        else:
            os.environ["COLL_LIBRARY"] = saved
        for m in [m for m in sys.modules if m == "collective" or m.startswith("collective.")]:
            del sys.modules[m]


def expect(exc, fn, *args, match=None, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        if match is not None:
            assert match in str(e), f"{exc.__name__} without {match!r}: {e}"
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {exc.__name__}")


def case_not_initialized(ctx):
    hvd = ctx.hvd
    assert not hvd.is_initialized()
    for fn in (hvd.rank, hvd.size, hvd.local_rank, hvd.local_size, hvd.cross_rank,
               hvd.cross_size, hvd.barrier, hvd.join):
        expect(ValueError, fn, match="init()")
    t = torch.ones(3)
    expect(ValueError, hvd.allreduce, t, match="init()")
    expect(ValueError, hvd.allreduce_async_, t, match="init()")
    expect(ValueError, hvd.grouped_allreduce, [t], match="init()")
    expect(ValueError, hvd.broadcast_, t, 0, match="init()")
    expect(ValueError, hvd.allgather, t, match="init()")
    expect(ValueError, hvd.alltoall, t, match="init()")
    expect(ValueError, hvd.reducescatter, t, match="init()")
    expect(ValueError, hvd.add_process_set, [0], match="init()")
    expect(ValueError, hvd.broadcast_object, {"a": 1}, match="init()")
    expect(ValueError, hvd.broadcast_parameters, {"w": t}, match="init()")
    # Eval mode needs no engine; training mode does.
    bn = hvd.SyncBatchNorm(3)
    bn.eval()
    bn(torch.randn(4, 3))
    bn.train()
    expect(ValueError, bn, torch.randn(4, 3), match="init()")
    assert issubclass(hvd.CollectiveError, RuntimeError)


def case_init_one_rank(ctx):
    hvd = ctx.hvd
    hvd.init()
    hvd.init()  # a second call while running does nothing
    assert hvd.is_initialized()
    assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
    assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1)
    x = torch.arange(6, dtype=torch.float32).view(2, 3)
    assert torch.equal(hvd.allreduce(x), x)
    assert torch.equal(hvd.allgather(x), x)
    # One rank: SyncBatchNorm is plain batch normalisation.
    torch.manual_seed(3)
    data = torch.randn(5, 3, 4, requires_grad=True)
    ref_in = data.detach().clone().requires_grad_()
    sbn, ref = hvd.SyncBatchNorm(3), torch.nn.BatchNorm1d(3)
    out, ref_out = sbn(data), ref(ref_in)
    assert torch.allclose(out, ref_out, atol=1e-6)
    out.sum().backward()
    ref_out.sum().backward()
    assert torch.allclose(data.grad, ref_in.grad, atol=1e-6)
    assert torch.allclose(sbn.running_var, ref.running_var)


def case_after_shutdown(ctx):
    hvd = ctx.hvd
    hvd.shutdown()
    hvd.shutdown()  # twice is fine
    assert not hvd.is_initialized()
    expect(ValueError, hvd.allreduce, torch.ones(2), match="init()")
    expect(ValueError, hvd.rank, match="init()")
