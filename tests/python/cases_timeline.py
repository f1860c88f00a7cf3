"""start_timeline / stop_timeline at run time: each file a valid Chrome trace (Perfetto),
holding the operations issued while it was recording and no others."""
import os
import shutil
import tempfile

import torch

from collective import CollectiveError
from trace_event_check import check

# One directory for the job (the ranks share this machine's /tmp): named after the job.
_dir = os.path.join(tempfile.gettempdir(), "coll_timeline_" + os.environ.get("COLL_JOB_ID", str(os.getppid())).replace("/", "_"))
os.makedirs(_dir, exist_ok=True)


def _names(events):
    return {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}


def _spans(events):
    return [e for e in events if e.get("ph") == "X"]


def case_start_stop_per_rank(ctx):
    hvd = ctx.hvd
    hvd.allreduce(torch.ones(8), name="tl.before")  # not recorded
    pattern = os.path.join(_dir, "first.%r.json")
    hvd.start_timeline(pattern, mark_cycles=True)
    for step in range(3):
        hvd.allreduce(torch.ones(1000) * step, name="tl.grad")
        hvd.allgather(torch.ones(2, 3), name="tl.gather")
    hvd.broadcast(torch.ones(4), root_rank=0, name="tl.bcast")
    hvd.stop_timeline()
    hvd.stop_timeline()  # nothing to stop: no error
    hvd.allreduce(torch.ones(8), name="tl.after")  # not recorded either
    path = pattern.replace("%r", str(ctx.rank))
    problems, events = check(path)
    assert not problems, "\n".join(problems)
    names = _names(events)
    assert {"engine", "tl.grad", "tl.gather", "tl.bcast"} <= names, names
    assert not names & {"tl.before", "tl.after"}, names
    phases = {e["name"] for e in _spans(events)}
    assert {"queue", "negotiate"} <= phases, phases
    assert all(e["pid"] == ctx.rank for e in events), "events of another rank"
    assert any(e.get("ph") == "i" and e["name"] == "cycle" for e in events), "mark_cycles: no cycle marker"


def case_restart_and_rank0_only(ctx):
    hvd = ctx.hvd
    # Without %r only rank 0 writes; a second start writes a new file.
    path = os.path.join(_dir, "second.json")
    hvd.start_timeline(path)
    try:
        hvd.start_timeline(os.path.join(_dir, "third.json"))
    except CollectiveError as e:
        assert ctx.rank != 0 or "already being written" in str(e), str(e)
    else:
        assert ctx.rank != 0, "a second start_timeline while recording was accepted"
    hvd.allreduce(torch.ones(16), name="tl.second")
    hvd.stop_timeline()
    hvd.barrier()
    if ctx.rank == 0:
        problems, events = check(path)
        assert not problems, "\n".join(problems)
        assert "tl.second" in _names(events)
        assert not any(e.get("ph") == "i" for e in events), "cycle markers without mark_cycles"
    # Rank 0's second start failed, and the other ranks write nothing without %r.
    assert not os.path.exists(os.path.join(_dir, "third.json")), "third.json was written"


def case_bad_paths(ctx):
    hvd = ctx.hvd
    for bad, kind in (("/nonexistent-coll-dir/%r.json", CollectiveError), (42, TypeError),
                      ("", CollectiveError)):
        try:
            hvd.start_timeline(bad)
        except kind:
            pass
        else:
            raise AssertionError(f"start_timeline({bad!r}) was accepted")
    # Still usable afterwards.
    path = os.path.join(_dir, "after-errors.%r.json")
    hvd.start_timeline(path)
    hvd.allreduce(torch.ones(4), name="tl.after_errors")
    hvd.stop_timeline()
    problems, _ = check(path.replace("%r", str(ctx.rank)))
    assert not problems, "\n".join(problems)


def case_cleanup(ctx):
    ctx.hvd.barrier()
    if ctx.rank == 0:
        shutil.rmtree(_dir, ignore_errors=True)
