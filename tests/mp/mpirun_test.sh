#!/bin/sh
# Runs PROG under Open MPI's mpirun; the library finds rank and size in OMPI_COMM_WORLD_*
# and bootstraps through MPI. Exits 77 (meson's "skipped") when mpirun is not installed.
#
#   mpirun_test.sh NP PROG [ARGS...]
[ $# -ge 2 ] || { echo "usage: $0 NP PROG [ARGS...]" >&2; exit 2; }
np=$1
shift
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun is not installed"; exit 77; }
# As root in a container Open MPI wants --allow-run-as-root; --oversubscribe allows more
# ranks than cores and --bind-to none keeps them from all being pinned to one core.
# -x passes the test's COLL_* tunables on (local ranks inherit them anyway; remote ones would not).
xs=
for v in $(env | sed -n 's/^\(COLL_[A-Za-z0-9_]*\)=.*/\1/p'); do xs="$xs -x $v"; done
# shellcheck disable=SC2086  # $xs is a list of words by design
exec mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" $xs "$@"
