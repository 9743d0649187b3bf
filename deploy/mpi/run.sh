#!/usr/bin/env bash
# shardps under mpirun: every MPI rank runs this script; ranks below
# SHARDPS_SERVERS become parameter servers, the others workers (worker rank =
# MPI rank - SHARDPS_SERVERS). No MPI library is used: ranks meet through
# the run directory, which must be on storage every host can write.
#
#   SHARDPS_SERVERS=2 SHARDPS_BIN=/opt/shardps/bin SHARDPS_RUN_DIR=/shared/run \
#     mpirun -np 6 [--hostfile hosts] deploy/mpi/run.sh --data=/shared/fmnist
#
# Server rank i listens on SHARDPS_PORT+i (default 7070+i; SHARDPS_PORT=0:
# any free port) and, once it does, announces HOST:PORT in
# RUN_DIR/mpi-JOB/servers/i, HOST being SHARDPS_SERVER_HOST or `hostname`;
# a server that cannot listen fails its rank at once, with its log. Workers
# wait for all announcements, train, and mark
# RUN_DIR/mpi-JOB/done/RANK; servers stop when every worker is done. A rank
# that fails makes mpirun stop the rest. Arguments are worker flags.
set -euo pipefail

rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}
size=${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-}}
if [ -z "$rank" ] || [ -z "$size" ]; then
  echo "run.sh: no MPI rank in the environment; start it with mpirun" >&2
  exit 2
fi
servers=${SHARDPS_SERVERS:-1}
bin=${SHARDPS_BIN:?set SHARDPS_BIN to the directory holding shardps-server and shardps-worker}
run_dir=${SHARDPS_RUN_DIR:?set SHARDPS_RUN_DIR to a directory every rank can write}
port=${SHARDPS_PORT:-7070}
timeout_s=${SHARDPS_START_TIMEOUT_S:-120}
for setting in "SHARDPS_SERVERS=$servers" "SHARDPS_PORT=$port" \
  "SHARDPS_START_TIMEOUT_S=$timeout_s"; do
  case ${setting#*=} in
    '' | *[!0-9]*)
      echo "run.sh: $setting is not a whole number" >&2
      exit 2
      ;;
  esac
done
mpi_job=${PMIX_NAMESPACE:-${OMPI_MCA_ess_base_jobid:-mpi}}
job="mpi-$mpi_job"
meet="$run_dir/$job"
workers=$((size - servers))
if [ "$workers" -lt 1 ]; then
  echo "run.sh: -np $size leaves no worker after $servers servers" >&2
  exit 2
fi
mkdir -p "$meet/servers" "$meet/done" "$meet/ports"
# One token for the job: whichever rank comes first links its candidate in
# place (atomic); every rank then uses that one.
token="$meet/job.token"
if [ ! -f "$token" ]; then
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token.$rank")
  ln "$token.$rank" "$token" 2>/dev/null || true
  rm -f "$token.$rank"
fi

# wait_for DIR COUNT WHAT [LIMIT_S]: until DIR holds COUNT files; an error
# after LIMIT_S seconds (0: no limit).
wait_for() {
  local waited=0 limit=${4:-0}
  until [ "$(find "$1" -mindepth 1 -maxdepth 1 ! -name '*.tmp' | wc -l)" -ge "$2" ]; do
    if [ "$limit" -gt 0 ] && [ "$waited" -ge $((limit * 10)) ]; then
      echo "run.sh: rank $rank: waited ${limit}s for $3 in $1" >&2
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
}

if [ "$rank" -lt "$servers" ]; then
  my_port=$port
  [ "$port" -eq 0 ] || my_port=$((port + rank))
  port_file="$meet/ports/$rank"
  log="$run_dir/server-$rank.log"
  # A port file left by an earlier run of this job would announce a server
  # that is not listening yet.
  rm -f "$port_file"
  "$bin/shardps-server" --host=0.0.0.0 --port="$my_port" --job="$job" \
    --auth_token_file="$token" --port_file="$port_file" >"$log" 2>&1 &
  server=$!
  # If mpirun stops this rank (a failed worker), stop the server with it.
  trap 'kill -TERM $server 2>/dev/null; wait $server; exit 143' TERM INT
  trap 'kill -TERM $server 2>/dev/null' EXIT
  # Announced only once it listens (the port file is written then).
  waited=0
  until [ -s "$port_file" ]; do
    if ! kill -0 "$server" 2>/dev/null; then
      echo "run.sh: rank $rank: shardps-server exited before listening on port $my_port:" >&2
      cat "$log" >&2
      exit 1
    fi
    if [ "$waited" -ge $((timeout_s * 10)) ]; then
      echo "run.sh: rank $rank: shardps-server not listening after ${timeout_s}s (see $log)" >&2
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  host=${SHARDPS_SERVER_HOST:-$(hostname)}
  echo "$host:$(cat "$port_file")" >"$meet/servers/$rank.tmp"
  mv "$meet/servers/$rank.tmp" "$meet/servers/$rank"
  # However long training takes; if a worker fails, mpirun stops this rank.
  wait_for "$meet/done" "$workers" "every worker to finish" 0
  trap - EXIT
  kill -TERM "$server"
  wait "$server"
else
  wait_for "$meet/servers" "$servers" "every server to announce itself" "$timeout_s"
  addrs=$(for ((i = 0; i < servers; i++)); do cat "$meet/servers/$i"; done | paste -sd, -)
  worker=$((rank - servers))
  "$bin/shardps-worker" --server_addrs="$addrs" --job="$job" \
    --auth_token_file="$token" \
    --rank="$worker" --world="$workers" --run_dir="$run_dir" "$@" \
    >"$run_dir/worker-$worker.log" 2>&1
  touch "$meet/done/$worker"
fi
