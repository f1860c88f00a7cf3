#!/bin/sh
# Stands in for ssh in the launcher tests: runs the remote command on this machine, but
# like a real remote login: in a clean environment and in a session of its own, so the
# launcher's process-group kill cannot reach it and only the remote side's own watcher
# (stdin closing) stops it. FAKE_SSH_HOST says which host was asked for.
host=$1
shift
exec setsid -w env -i PATH=/usr/bin:/bin HOME="${HOME:-/}" FAKE_SSH_HOST="$host" /bin/sh -c "$*"
