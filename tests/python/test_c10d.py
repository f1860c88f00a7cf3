"""The torch.distributed backend "collective" (collective.distributed), in jobs of 2 and 3
ranks started by torchrun (and 1 rank), by collectiverun, by mpirun and by hand (tcp://, file://, store=), each
rank running the cases of c10d_cases.py. Needs $COLL_C10D_MODULE (the built extension);
meson sets it, with $COLLECTIVERUN.
"""
import os
import socket
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "c10d_cases.py")
PY = sys.executable

pytestmark = pytest.mark.skipif(not os.environ.get("COLL_C10D_MODULE"),
                                reason="the torch backend (COLL_C10D_MODULE) is not built")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(procs_or_result, what):
    out = procs_or_result.stdout if hasattr(procs_or_result, "stdout") else ""
    assert procs_or_result.returncode == 0, f"{what} failed (exit {procs_or_result.returncode}):\n{out}"


def torchrun(n, *cases, timeout=240):
    # Debian's torch 1.13 on Python 3.11 fails to parse torchrun's default --redirects and
    # --tee ("0": Flag iteration skips the zero member): pass non-zero ones. The ranks'
    # stderr then goes to the log directory, so c10d_cases.py writes its errors to stdout.
    with tempfile.TemporaryDirectory() as logs:
        cmd = [PY, "-m", "torch.distributed.run", "--nproc_per_node", str(n), "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), "--max_restarts", "0", "--redirects", "2", "--tee", "1",
               "--log_dir", logs, CASES, "env", *cases]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)


def by_hand(n, launch, *cases, timeout=120):
    """n ranks started here with RANK and WORLD_SIZE; returns their (exit code, output)."""
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([PY, CASES, launch, *cases], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n(killed: timed out)"
        results.append((p.returncode, out))
    return results


ALL_OPS = ["allreduce", "rooted", "gathers", "alltoall", "p2p", "futures", "subgroups", "errors"]


def test_torchrun_np1():
    check(torchrun(1, "allreduce", "rooted", "gathers", "alltoall", "futures"), "torchrun -np 1")


def test_torchrun_np2_ops_and_ddp():
    check(torchrun(2, *ALL_OPS, "ddp"), "torchrun -np 2")


def test_torchrun_np3_ops():
    check(torchrun(3, *ALL_OPS), "torchrun -np 3")


def test_torchrun_np3_monitored_barrier():
    """collective.distributed.monitored_barrier: all ranks there (repeatedly, subgroups, a
    Gloo group), bad arguments, rank 2 absent (rank 0 names it within about the 3 s
    timeout), ranks 1 and 2 absent with wait_all_ranks=True (rank 0 names both)."""
    res = torchrun(3, "mbarrier_ok", "mbarrier_errors", "mbarrier_absent", "mbarrier_all_absent", timeout=120)
    check(res, "torchrun -np 3 monitored_barrier")
    assert "Rank 2 failed to pass monitoredBarrier in 3000 ms" in res.stdout, res.stdout
    assert "Ranks 1, 2 failed to pass monitoredBarrier in 3000 ms" in res.stdout, res.stdout


def test_collectiverun_np2():
    run = os.environ.get("COLLECTIVERUN")
    if not run:
        pytest.skip("COLLECTIVERUN not set")
    cmd = [run, "-np", "2", "--timeout", "120", PY, CASES, "launcher", "rooted", "alltoall", "futures", "subgroups"]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150)
    check(res, "collectiverun -np 2")


def test_mpirun_np2():
    import shutil
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("mpirun not found")
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    for var in ("PYTHONPATH", "COLL_C10D_MODULE", "COLL_SOCKET_IFNAME", "COLL_TIMEOUT", "COLL_LIBRARY"):
        if var in os.environ:
            cmd += ["-x", var]
    cmd += [PY, CASES, "launcher", "smoke", "rooted"]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    check(res, "mpirun -np 2")


@pytest.mark.parametrize("method", ["tcp", "file", "store"])
def test_init_methods(method):
    with tempfile.TemporaryDirectory() as tmp:
        launch = {"tcp": f"tcp:127.0.0.1:{free_port()}",
                  "file": "file:" + os.path.join(tmp, "rendezvous"),
                  "store": f"store:127.0.0.1:{free_port()}"}[method]
        for rc, out in by_hand(2, launch, "smoke"):
            assert rc == 0, f"{method} init failed:\n{out}"


def test_killed_rank_raises():
    env_timeout = "20"
    os.environ["C10D_TEST_TIMEOUT"] = env_timeout
    try:
        results = by_hand(2, f"tcp:127.0.0.1:{free_port()}", "killed", timeout=90)
    finally:
        del os.environ["C10D_TEST_TIMEOUT"]
    (rc0, out0), (rc1, out1) = results
    assert rc1 == 3, f"rank 1 should have exited with 3:\n{out1}"
    assert rc0 == 0, f"rank 0 did not see the dead peer as an exception:\n{out0}"
    assert "raised after" in out0, out0


def test_frozen_rank_times_out():
    """A stopped peer: the other's all-reduce fails within the group's timeout (5 s here,
    where COLL_TIMEOUT says 60), so the timeout of init_process_group is the library's."""
    port = free_port()
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", OMP_NUM_THREADS="1", C10D_TEST_TIMEOUT="5")
        procs.append(subprocess.Popen([PY, CASES, f"tcp:127.0.0.1:{port}", "frozen"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        out0, _ = procs[0].communicate(timeout=60)
    finally:
        procs[1].kill()  # stopped: SIGKILL still ends it
        procs[1].communicate()
        if procs[0].poll() is None:
            procs[0].kill()
    assert procs[0].returncode == 0, f"rank 0 did not see the frozen peer as an exception:\n{out0}"
    assert "frozen peer raised after" in out0 and "did not complete within COLL_TIMEOUT=5 s" in out0, out0
