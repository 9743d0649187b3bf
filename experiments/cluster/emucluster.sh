#!/usr/bin/env bash
# An emulated cluster on one machine: every host is a Linux network
# namespace with one link (a veth pair) into a bridge that lives in its own
# "switch" namespace; each host's link is capped in both directions with
# tc (tbf on the host's egress; ingress redirected through an ifb device
# and capped there too). The machine's own network is never touched: every
# interface and address is inside the namespaces made here.
#
#   emucluster.sh up   --name=N --servers=S --workers=W [--subnet=10.213]
#                      [--server_link=200mbit] [--worker_link=1gbit]
#                      [--storage_link=400mbit] [--data_root=DIR]
#   emucluster.sh down --name=N
#   emucluster.sh list --name=N     # what exists now (empty when torn down)
#   emucluster.sh stats --name=N    # bytes sent and packets dropped per link
#
# Hosts and addresses (SUBNET.0.0/16):
#   N-ctl  SUBNET.0.1   the launcher's control host (no cap)
#   N-st   SUBNET.0.2   storage: nginx serving DATA_ROOT on port 80
#   N-s<i> SUBNET.1.<i+1>  server i      N-w<i> SUBNET.2.<i+1>  worker i
# Needs root; re-runs itself with sudo otherwise. `up` first removes any
# cluster of the same name; `down` kills every process left in its
# namespaces and deletes them (interfaces go with them).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "emucluster: needs root or sudo" >&2; exit 1; }
  exec sudo -n "$0" "$@"
fi

cmd=${1:-}; shift || true
name="" servers=1 workers=1 subnet=10.213 data_root=""
server_link=200mbit worker_link=1gbit storage_link=400mbit queue_pkts=${EMUCLUSTER_QUEUE_PKTS:-2000}
for arg in "$@"; do
  case $arg in
    --name=*) name=${arg#*=} ;;
    --servers=*) servers=${arg#*=} ;;
    --workers=*) workers=${arg#*=} ;;
    --subnet=*) subnet=${arg#*=} ;;
    --data_root=*) data_root=${arg#*=} ;;
    --server_link=*) server_link=${arg#*=} ;;
    --worker_link=*) worker_link=${arg#*=} ;;
    --storage_link=*) storage_link=${arg#*=} ;;
    *) echo "emucluster: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ -n "$name" ] || { echo "emucluster: --name is required" >&2; exit 2; }
case $name in *[!a-zA-Z0-9-]*) echo "emucluster: --name must be [a-zA-Z0-9-]" >&2; exit 2 ;; esac

# Processes in namespace $1, but never this script or its caller.
pids_in() { ip netns pids "$1" 2>/dev/null | grep -vxE "$$|$PPID" || true; }

namespaces() { ip netns list | awk '{print $1}' | grep -E "^${name}-(sw|ctl|st|s[0-9]+|w[0-9]+)$" || true; }

down() {
  local ns pids
  for ns in $(namespaces); do
    pids=$(pids_in "$ns")
    [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
  done
  for _ in $(seq 50); do  # up to 5 s for a clean exit, then SIGKILL
    pids=""
    for ns in $(namespaces); do pids+=" $(pids_in "$ns")"; done
    [ -z "${pids// /}" ] && break
    sleep 0.1
  done
  for ns in $(namespaces); do
    pids=$(pids_in "$ns")
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
  done
  for ns in $(namespaces); do ip netns del "$ns"; done
  rm -rf "/run/shardps-emucluster/$name"
}

# kbit RATE: a tc rate ("800kbit", "200mbit", "1gbit") in kbit/s.
kbit() {
  [[ $1 =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] || { echo "emucluster: rate $1 is not NUMBER{kbit,mbit,gbit}" >&2; exit 2; }
  case ${BASH_REMATCH[2]} in
    kbit) echo "${BASH_REMATCH[1]}" ;;
    mbit) echo $((BASH_REMATCH[1] * 1000)) ;;
    gbit) echo $((BASH_REMATCH[1] * 1000000)) ;;
  esac
}

# shape NS DEV RATE: cap what leaves DEV at RATE with htb. Small packets
# (TCP ACKs, window updates; IPv4 length < 128) get their own class with
# priority, so that they pass the bulk data queued in the same direction
# as they would through a switch port with a shallow buffer; the bulk
# queue is deep (up to $queue_pkts packets) so that TCP sees a slow link,
# not a lossy one.
shape() {
  local ns=$1 dev=$2 r
  r=$(kbit "$3")
  local t="ip netns exec $ns tc"
  $t qdisc add dev "$dev" root handle 1: htb default 20
  $t class add dev "$dev" parent 1: classid 1:1 htb rate "${r}kbit" ceil "${r}kbit" burst 64k cburst 64k quantum 30000
  $t class add dev "$dev" parent 1:1 classid 1:10 htb rate "$((r / 10))kbit" ceil "${r}kbit" prio 0 quantum 30000
  $t class add dev "$dev" parent 1:1 classid 1:20 htb rate "$((r - r / 10))kbit" ceil "${r}kbit" prio 1 quantum 30000
  $t qdisc add dev "$dev" parent 1:10 handle 10: pfifo limit 1000
  $t qdisc add dev "$dev" parent 1:20 handle 20: pfifo limit "$queue_pkts"
  $t filter add dev "$dev" parent 1: protocol ip prio 1 u32 match u16 0x0000 0xff80 at 2 flowid 1:10
}

# cap NS IFACE RATE: RATE each way on IFACE inside namespace NS.
cap() {
  local ns=$1 dev=$2 rate=$3
  shape "$ns" "$dev" "$rate"
  ip -n "$ns" link add ifb0 type ifb
  ip -n "$ns" link set ifb0 up
  ip netns exec "$ns" tc qdisc add dev "$dev" handle ffff: ingress
  ip netns exec "$ns" tc filter add dev "$dev" parent ffff: protocol all u32 match u32 0 0 \
    action mirred egress redirect dev ifb0
  shape "$ns" ifb0 "$rate"
}

# host SHORT ADDRESS RATE: namespace NAME-SHORT on the bridge at ADDRESS.
host() {
  local short=$1 addr=$2 rate=$3 ns="$name-$1"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add eth0 netns "$ns" type veth peer name "$short" netns "$name-sw"
  ip -n "$name-sw" link set "$short" master br0 up
  ip -n "$ns" addr add "$addr/16" dev eth0
  ip -n "$ns" link set eth0 up
  [ "$rate" = none ] || cap "$ns" eth0 "$rate"
}

up() {
  down
  trap 'down' ERR
  ip netns add "$name-sw"
  ip -n "$name-sw" link add br0 type bridge
  ip -n "$name-sw" link set br0 up
  host ctl "$subnet.0.1" none
  host st "$subnet.0.2" "$storage_link"
  local i
  for ((i = 0; i < servers; i++)); do host "s$i" "$subnet.1.$((i + 1))" "$server_link"; done
  for ((i = 0; i < workers; i++)); do host "w$i" "$subnet.2.$((i + 1))" "$worker_link"; done
  if [ -n "$data_root" ]; then
    local conf="/run/shardps-emucluster/$name"
    mkdir -p "$conf"
    cat > "$conf/nginx.conf" <<CONF
user root;
worker_processes 1;
pid $conf/nginx.pid;
error_log $conf/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  client_body_temp_path $conf; proxy_temp_path $conf; fastcgi_temp_path $conf;
  uwsgi_temp_path $conf; scgi_temp_path $conf;
  server { listen $subnet.0.2:80; root $data_root; }
}
CONF
    ip netns exec "$name-st" nginx -c "$conf/nginx.conf" -e "$conf/error.log"
  fi
  trap - ERR
}

# Per capped interface: "HOST DEV sent_bytes dropped_packets".
stats() {
  local ns dev line
  for ns in $(namespaces); do
    case $ns in "$name-sw" | "$name-ctl") continue ;; esac
    for dev in eth0 ifb0; do
      line=$(ip netns exec "$ns" tc -s qdisc show dev "$dev" 2>/dev/null | grep -m1 ' Sent ' || true)
      [ -n "$line" ] || continue
      echo "${ns#"$name"-} $dev $(echo "$line" | awk '{print $2}') $(echo "$line" | sed -E 's/.*dropped ([0-9]+).*/\1/')"
    done
  done
}

case $cmd in
  up) up ;;
  stats) stats ;;
  down) down ;;
  list) namespaces ;;
  *) echo "usage: emucluster.sh up|down|list|stats --name=NAME [...]" >&2; exit 2 ;;
esac
