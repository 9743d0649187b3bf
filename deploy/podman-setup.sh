#!/usr/bin/env bash
# Podman for shardps's container tests and for users without a Docker
# engine, configured privately: everything lives under $SHARDPS_PODMAN_DIR
# (default /var/tmp/shardps-podman) and is selected through the
# CONTAINERS_CONF / CONTAINERS_STORAGE_CONF variables that this script
# prints; the host's own container configuration and networking are not
# touched (containers use --network host or the emulated cluster's
# namespaces, never podman's bridge).
#
#   eval "$(deploy/podman-setup.sh)"   # installs, configures, makes the base image
#   podman build ... / podman run ...
#
# Settings that work on these VMs: storage driver vfs; runtime runc (crun
# fails on this cgroup setup); cgroup_manager cgroupfs; default ulimits
# nofile=20000:20000, nproc=32768:32768. No registry is reachable, so the
# base image (localhost/debian:bookworm) is made with debootstrap from the
# mirror in apt's sources and imported.
set -euo pipefail

dir=${SHARDPS_PODMAN_DIR:-/var/tmp/shardps-podman}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

need=()
for p in podman buildah runc debootstrap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "podman-setup: installing ${need[*]}" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

$sudo mkdir -p "$dir/storage" "$dir/run" "$dir/tmp"
$sudo tee "$dir/containers.conf" >/dev/null <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
netns = "host"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$dir/tmp"
CONF
$sudo tee "$dir/storage.conf" >/dev/null <<CONF
[storage]
driver = "vfs"
graphroot = "$dir/storage"
runroot = "$dir/run"
CONF
export CONTAINERS_CONF="$dir/containers.conf" CONTAINERS_STORAGE_CONF="$dir/storage.conf"

# The base image, once.
if ! $sudo env CONTAINERS_CONF="$CONTAINERS_CONF" CONTAINERS_STORAGE_CONF="$CONTAINERS_STORAGE_CONF" \
    podman image exists localhost/debian:bookworm; then
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)}
  mirror=${mirror:-http://deb.debian.org/debian}
  root="$dir/rootfs"
  $sudo rm -rf "$root"
  echo "podman-setup: debootstrap --variant=minbase bookworm from $mirror" >&2
  $sudo debootstrap --variant=minbase bookworm "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
    { echo "podman-setup: debootstrap failed, see $dir/debootstrap.log" >&2; exit 1; }
  $sudo tar -C "$root" -c . | $sudo env CONTAINERS_CONF="$CONTAINERS_CONF" \
    CONTAINERS_STORAGE_CONF="$CONTAINERS_STORAGE_CONF" podman import - localhost/debian:bookworm >/dev/null
  $sudo rm -rf "$root"
fi
echo "export CONTAINERS_CONF=$CONTAINERS_CONF CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF"
