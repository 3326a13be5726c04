#!/bin/bash
# Runs sglang (the arguments) with its stdout AND stderr appended to $SGLANG_LOG_FILE, on the
# emptyDir the sglang-matcher sidecar reads, and still written to the container's own output
# (`kubectl logs`).
#
# Why both streams: sglang prints launch errors (a bad argument, the seed's ValueError) to stderr
# before its logging is set up; a file written only by logging would miss exactly those.
# Why not `sglang 2>&1 | tee`: a shell pipeline would stand between kubelet's SIGTERM and sglang.
# Here sglang gets the signal itself, its exit status is the container's, and tee is waited for,
# so every line sglang wrote is in the file before the container ends.
# The file is never rotated: size the emptyDir (sizeLimit) for the pod's lifetime of logs.
set -u
log=${SGLANG_LOG_FILE:-/var/log/sglang/server.log}
umask 022  # the matcher runs as another user: it needs to read the file
mkdir -p "$(dirname "$log")"
dir=$(mktemp -d)
mkfifo "$dir/out"
tee -a "$log" < "$dir/out" &
tee_pid=$!
"$@" > "$dir/out" 2>&1 &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT

status=0
while :; do
  wait "$child"
  s=$?
  [ "$s" -eq 127 ] && break  # already reaped: its status is the one kept below
  status=$s
  # Above 128 may mean our trap interrupted `wait`, not that sglang ended: wait again.
  [ "$s" -gt 128 ] || break
done
wait "$tee_pid"
rm -rf "$dir"
exit "$status"
