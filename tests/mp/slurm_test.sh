#!/bin/bash
# Runs the library under a real one-node Slurm cluster started for the test: munged,
# slurmctld and slurmd on this machine (as root), with a slurm.conf generated in a
# temporary directory, the node advertising this machine's real CPU count and the
# partition oversubscribed, so that 4 ranks run on fewer cores (srun --overcommit).
# Checks, each through collCommInitFromEnv's Slurm path (SLURM_PROCID, SLURM_STEP_*):
#   1. srun -n 4 all_reduce_perf -c 1: every rank exits 0, "Out of bounds values : 0 OK";
#   2. srun -n 4 mp_collectives --quick: every rank prints its OK line;
#   3. sbatch of a job script with two steps (srun -n 2 all_reduce_perf, then srun -n 3
#      mp_collectives --quick): both steps complete (ExitCode 0:0) with the same checks.
# The daemons are stopped and the directory removed on exit, also on failure.
# Exits 77 (meson's "skipped") where the daemons cannot start: not root, Slurm or munge
# not installed (Debian: slurm-wlm munge), or they fail to come up; the message says why.
#
#   slurm_test.sh ALL_REDUCE_PERF MP_COLLECTIVES
set -u
[ $# -eq 2 ] || { echo "usage: $0 ALL_REDUCE_PERF MP_COLLECTIVES" >&2; exit 2; }
perf=$(realpath "$1")
mpc=$(realpath "$2")

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; status=1; }

[ "$(id -u)" -eq 0 ] || skip "starting slurmctld, slurmd and munged needs root"
for p in munged slurmctld slurmd srun sbatch scontrol sinfo; do
  command -v $p >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v $p >/dev/null 2>&1 ||
    skip "'$p' is not installed (Debian packages: slurm-wlm munge)"
done
export PATH=$PATH:/usr/sbin

# The daemons read everything from here; 755 so that munged accepts the socket's path.
tmp=$(mktemp -d /tmp/coll-slurm.XXXXXX)
chmod 755 "$tmp"
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/out"
status=0

stop_daemon() {  # pid file
  [ -s "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
}
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  # Jobs first, then the daemons in the reverse order of their start.
  [ -s "$tmp/slurmctld.pid" ] && timeout 10 scancel -Q -p coll 2>/dev/null
  stop_daemon "$tmp/slurmd.pid"
  stop_daemon "$tmp/slurmctld.pid"
  stop_daemon "$tmp/munged.pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two free ports of our own (a concurrent run of this test picks others).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
host=$(hostname -s)
cpus=$(nproc)

head -c 1024 /dev/urandom >"$tmp/munge.key"
chmod 400 "$tmp/munge.key"
munged -f --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" --log-file="$tmp/munged.log" \
  --pid-file="$tmp/munged.pid" --seed-file="$tmp/munged.seed" >"$tmp/munged.out" 2>&1 ||
  skip "munged did not start: $(tail -q -n 3 "$tmp/munged.out" "$tmp/munged.log" 2>/dev/null | tr '\n' ' ')"

plugindir=
for d in /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib/aarch64-linux-gnu/slurm-wlm /usr/lib/slurm-wlm /usr/lib64/slurm /usr/lib/slurm; do
  [ -e "$d/auth_munge.so" ] && { plugindir=$d; break; }
done
[ -n "$plugindir" ] || skip "Slurm's plugins (auth_munge.so) were not found"

cat >"$tmp/slurm.conf" <<EOF
ClusterName=colltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
PluginDir=$plugindir
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=coll Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$tmp/slurm.conf
# Nothing from an outer allocation may leak into ours.
for v in $(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p'); do [ "$v" = SLURM_CONF ] || unset "$v"; done

slurmctld -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 ||
  skip "slurmctld did not start: $(tail -q -n 3 "$tmp/slurmctld.out" "$tmp/slurmctld.log" 2>/dev/null | tr '\n' ' ')"
slurmd -f "$SLURM_CONF" -N "$host" >"$tmp/slurmd.out" 2>&1 ||
  skip "slurmd did not start: $(tail -q -n 3 "$tmp/slurmd.out" "$tmp/slurmd.log" 2>/dev/null | tr '\n' ' ')"
up=0
for _ in $(seq 100); do
  if [ "$(sinfo -h -n "$host" -o %t 2>/dev/null)" = idle ]; then up=1; break; fi
  sleep 0.2
done
[ $up -eq 1 ] || skip "the node did not come up idle within 20 s: $(sinfo -h -o '%t %E' 2>&1) $(tail -q -n 3 "$tmp/slurmctld.log" "$tmp/slurmd.log" 2>/dev/null | tr '\n' ' ')"
echo "slurm: $(sinfo -h -o '%P %D node %N, %c CPUs, %t') (slurmctld :$ctld_port, slurmd :$slurmd_port)"

export COLL_TIMEOUT=${COLL_TIMEOUT:-60}
# A fixed secret keeps the library from warning about the one it would derive from the ids.
COLL_JOB_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export COLL_JOB_SECRET

check_perf() {  # what log
  grep -q '^# Out of bounds values : 0 OK' "$2" || fail "$1: no '# Out of bounds values : 0 OK' line"
  grep -q "^# Collective test concluded: all_reduce_perf" "$2" || fail "$1: no closing line"
}
check_mp() {  # what np log
  local r
  for r in $(seq 0 $(($2 - 1))); do
    grep -q "rank $r of $2: OK" "$3" || fail "$1: rank $r did not print its OK line"
  done
}

echo "== srun -n 4 all_reduce_perf"
timeout 120 srun -n 4 --overcommit -t 2 "$perf" -b 8 -e 1M -f 8 -n 5 -w 1 -c 1 >"$tmp/out/perf.log" 2>&1
rc=$?
cat "$tmp/out/perf.log"
[ $rc -eq 0 ] || fail "srun all_reduce_perf exited with $rc"
check_perf "srun all_reduce_perf" "$tmp/out/perf.log"
[ "$(grep -c '^#  Rank ' "$tmp/out/perf.log")" = 4 ] || fail "srun all_reduce_perf: not a job of 4 ranks"

echo "== srun -n 4 mp_collectives --quick"
timeout 150 srun -n 4 --overcommit -t 3 "$mpc" --quick >"$tmp/out/mp.log" 2>&1
rc=$?
grep -E 'OK|FAIL|rror' "$tmp/out/mp.log" | head -20
[ $rc -eq 0 ] || { tail -n 20 "$tmp/out/mp.log"; fail "srun mp_collectives exited with $rc"; }
check_mp "srun mp_collectives" 4 "$tmp/out/mp.log"

echo "== sbatch: two steps"
cat >"$tmp/job.sh" <<EOF
#!/bin/bash
#SBATCH -n 3
#SBATCH --overcommit
#SBATCH -t 4
#SBATCH -o $tmp/out/job.log
srun -n 2 "$perf" -b 1K -e 64K -f 4 -n 5 -w 1 -c 1 > "$tmp/out/step0.log" 2>&1 || exit 10
srun -n 3 "$mpc" --quick > "$tmp/out/step1.log" 2>&1 || exit 11
EOF
job=$(sbatch --parsable "$tmp/job.sh") || fail "sbatch refused the job script"
if [ -n "${job:-}" ]; then
  state=
  for _ in $(seq 900); do
    state=$(scontrol -o show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
    sleep 0.2
  done
  code=$(scontrol -o show job "$job" 2>/dev/null | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
  echo "job $job: $state, exit code $code"
  cat "$tmp/out/step0.log" 2>/dev/null
  grep -E 'OK|FAIL' "$tmp/out/step1.log" 2>/dev/null
  [ "$state" = COMPLETED ] && [ "$code" = 0:0 ] || { cat "$tmp/out/job.log" "$tmp/out/step1.log" 2>/dev/null | tail -n 20; fail "sbatch job ended $state with exit code $code"; }
  [ "$(grep -c '^#  Rank ' "$tmp/out/step0.log")" = 2 ] || fail "sbatch step 0: not a job of 2 ranks"
  check_perf "sbatch step 0 (all_reduce_perf)" "$tmp/out/step0.log"
  check_mp "sbatch step 1 (mp_collectives)" 3 "$tmp/out/step1.log"
fi

[ $status -eq 0 ] && echo "summary: one-node Slurm ($cpus CPUs, oversubscribed): srun -n 4 all_reduce_perf, srun -n 4 mp_collectives and a two-step sbatch job all passed"
exit $status
