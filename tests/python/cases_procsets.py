"""Process sets (3 or more ranks): a set of ranks 0 and 2."""
import torch

from cases_ops import data


def case_process_set_of_two(ctx):
    hvd = ctx.hvd
    assert ctx.size >= 3
    ps = hvd.add_process_set([2, 0])
    member = ctx.rank in (0, 2)
    assert ps.ranks == [0, 2]
    assert ps.size() == 2
    assert ps.rank() == ({0: 0, 2: 1}[ctx.rank] if member else -1)
    assert ps.included() == member
    x = data(ctx.rank, (6,), torch.float32)
    if member:
        got = hvd.allreduce(x, op=hvd.Sum, process_set=ps, name="ps.sum")
        assert torch.equal(got, data(0, (6,), torch.float32) + data(2, (6,), torch.float32))
        # root_rank is a global rank, as in horovod (the set's rank 1)
        got = hvd.broadcast(x, 2, process_set=ps, name="ps.bcast")
        assert torch.equal(got, data(2, (6,), torch.float32))
        got = hvd.allgather(torch.tensor([ctx.rank]), process_set=ps)
        assert got.tolist() == [0, 2]
        hvd.barrier(process_set=ps)
    else:
        try:
            hvd.allreduce(x, process_set=ps, name="ps.outsider")
        except hvd.CollectiveError as e:
            assert "not a member" in str(e), str(e)
        else:
            raise AssertionError("a rank outside the set ran its allreduce")
    # Meanwhile the global set works for everyone.
    got = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="ps.global")
    assert torch.all(got == ctx.size)
    hvd.barrier()
    assert hvd.remove_process_set(ps) is True
    assert hvd.remove_process_set(ps) is False
    assert hvd.remove_process_set(hvd.global_process_set) is False
    try:
        hvd.allreduce(x, process_set=ps)
    except ValueError as e:
        assert "not registered" in str(e)
    else:
        raise AssertionError("a removed process set was accepted")


def case_process_sets_at_init_and_bad_ranks(ctx):
    hvd = ctx.hvd
    ps = hvd.ProcessSet([1, 2])
    hvd.init(process_sets=[ps])  # already running: only registers the set
    assert ps.size() == 2
    if ctx.rank in (1, 2):
        got = hvd.allreduce(torch.tensor([ctx.rank]), op=hvd.Sum, process_set=ps)
        assert got.item() == 3
    hvd.barrier()
    assert hvd.remove_process_set(ps)
    try:
        hvd.add_process_set([0, ctx.size])
    except hvd.CollectiveError as e:
        assert e.code == 1 and str(ctx.size) in str(e), (e.code, str(e))
    else:
        raise AssertionError("a process set with a rank outside the job was accepted")
    try:
        hvd.ProcessSet([0, 0])
    except ValueError:
        pass
    else:
        raise AssertionError("duplicate ranks were accepted")
