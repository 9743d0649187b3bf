#!/usr/bin/env bash
# Installs the Debian 12 packages shardps builds, tests and runs with.
# Idempotent: prints nothing and touches nothing when every package is present.
set -euo pipefail

packages=(
  build-essential cmake pkgconf make
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libopenblas-dev libxxhash-dev  # xxHash: sparse ids to shards
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev libcurl4-openssl-dev dataset-fashion-mnist
  nginx-light iproute2 procps python3-matplotlib  # the emulated cluster and experiments/
  slurm-wlm munge openmpi-bin docker-compose openssh-server  # deploy tests
  clang-14 libfuzzer-14-dev  # fuzz targets (tests/fuzz)
  prometheus-cpp-dev prometheus  # --metrics_port and its scrape test
  universal-ctags  # tests/layout: function lengths
  strace  # tests/fault: crash points inside a checkpoint write
  openssl  # test certificates for the TLS tests
  etcd-server  # membership of replicated shards (--etcd, --replicas)
  libsimgrid-dev  # the scale simulation (experiments/sim, make scale)
  iperf3  # experiments/real_workloads.py wire: TCP itself, beside the wire
  pybind11-dev python3-dev python3-numpy python3-torch  # the shardps Python package
)

# kubectl may already come from another package (e.g. Google's); Debian's
# kubernetes-client only when there is none.
command -v kubectl >/dev/null || packages+=(kubernetes-client)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# The offline Kubernetes schema validator (npm, pinned by its lock file).
validator="$(dirname "$0")/k8s/validate"
install_validator() {
  if command -v npm >/dev/null && [ ! -d "$validator/node_modules" ]; then
    echo "install-deps: npm ci in $validator"
    npm ci --prefix "$validator" --no-audit --no-fund --loglevel=error >/dev/null
  fi
}
if [ ${#missing[@]} -eq 0 ]; then
  install_validator
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Installing must not start system services (nginx, munge, sshd): the
# tests start their own, privately configured. policy-rc.d says so to
# invoke-rc.d, for this install only.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  own_policy=1
  trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_validator
