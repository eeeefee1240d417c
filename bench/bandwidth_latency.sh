#!/usr/bin/env bash
# Bench (not a test): plumb's eBPF "bandwidth" vs the reference plugin (/usr/lib/cni/bandwidth,
# TBF + IFB), same settings, one run. For each: the achieved rate of a TCP stream in each
# direction, and ping RTT between the pod and its gateway while a TCP stream saturates the limit
# (and idle, as a baseline).
#
# Usage (root):  bench/bandwidth_latency.sh <path to plumb> [rate_bps] [burst_bits] [seconds]
# Defaults: 50 Mbit/s, 1 Mbit burst, 5 s transfers (after a 1 s warm-up that iperf3 omits).
# CC=cubic|bbr|reno selects the TCP congestion control of the streams (default: the kernel's).
#
# Everything runs in a private network + mount namespace (re-exec under unshare): the bridges,
# pods, IFB devices, BPF pins (a private bpffs) and iperf3 servers die with it. Only processes
# this script started are stopped, by pid. Addresses are documentation ranges.
set -euo pipefail

if [ "${PLUMB_BENCH_PRIVATE:-}" != 1 ]; then
  [ $# -ge 1 ] || { echo "usage: $0 <plumb binary> [rate_bps] [burst_bits] [seconds]" >&2; exit 2; }
  [ "$(id -u)" = 0 ] || { echo "$0: needs root (namespaces, tc, BPF)" >&2; exit 2; }
  for tool in iperf3 ping jq ip tc; do command -v "$tool" >/dev/null || { echo "$0: $tool is missing (scripts/install-deps)" >&2; exit 2; }; done
  [ -x /usr/lib/cni/bandwidth ] && [ -x /usr/lib/cni/bridge ] || { echo "$0: reference plugins missing in /usr/lib/cni" >&2; exit 2; }
  exec env PLUMB_BENCH_PRIVATE=1 unshare -n -m --propagation private "$0" "$@"
fi

PLUMB=$(readlink -f "$1")
RATE=${2:-50000000}
BURST=${3:-1000000}
SECS=${4:-5}
W=$(mktemp -d /tmp/plumb-bwbench-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  umount "$W/bpf" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT

mount -t tmpfs tmpfs /run/netns 2>/dev/null || { mkdir -p /run/netns && mount -t tmpfs tmpfs /run/netns; }
mkdir -p "$W/bpf" "$W/store/nads" "$W/ipam"
mount -t bpf bpf "$W/bpf"
ip link set lo up

BW_JSON="{\"ingressRate\":$RATE,\"ingressBurst\":$BURST,\"egressRate\":$RATE,\"egressBurst\":$BURST}"

# --- plumb: its default network is bridge + bandwidth, limits through runtimeConfig ---
ip netns add bw-plumb
cat > "$W/plumb.conflist" <<EOF
{"cniVersion":"1.0.0","name":"plumb-net","plugins":[
 {"type":"bridge","bridge":"bwb-plumb","isGateway":true,"ipam":{"type":"host-local","dataDir":"$W/ipam","ranges":[[{"subnet":"203.0.113.0/24"}]]}},
 {"type":"bandwidth","capabilities":{"bandwidth":true}}]}
EOF
PLUMB_CONF="{\"cniVersion\":\"1.0.0\",\"name\":\"plumb\",\"type\":\"plumb\",\"clusterNetwork\":\"$W/plumb.conflist\",\"storeDir\":\"$W/store\",\"stateDir\":\"$W/state\",\"bpffsDir\":\"$W/bpf/plumb\",\"runtimeConfig\":{\"bandwidth\":$BW_JSON}}"
plumb_cni() {
  echo "$PLUMB_CONF" | CNI_COMMAND=$1 CNI_CONTAINERID=bench-plumb CNI_NETNS=/run/netns/bw-plumb CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni "$PLUMB"
}
plumb_cni ADD > "$W/plumb.result"

# --- reference: bridge then bandwidth, chained by hand as the CNI spec describes ---
ip netns add bw-ref
REF_BRIDGE="{\"cniVersion\":\"1.0.0\",\"name\":\"ref-net\",\"type\":\"bridge\",\"bridge\":\"bwb-ref\",\"isGateway\":true,\"ipam\":{\"type\":\"host-local\",\"dataDir\":\"$W/ipam\",\"ranges\":[[{\"subnet\":\"198.51.100.0/24\"}]]}}"
ref_env() { env CNI_COMMAND="$1" CNI_CONTAINERID=bench-ref CNI_NETNS=/run/netns/bw-ref CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni "${@:2}"; }
echo "$REF_BRIDGE" | ref_env ADD /usr/lib/cni/bridge > "$W/ref.bridge"
REF_BW=$(jq -c --argjson prev "$(cat "$W/ref.bridge")" --argjson bw "$BW_JSON" -n \
  '{cniVersion:"1.0.0",name:"ref-net",type:"bandwidth",capabilities:{bandwidth:true},runtimeConfig:{bandwidth:$bw},prevResult:$prev}')
echo "$REF_BW" | ref_env ADD /usr/lib/cni/bandwidth > "$W/ref.result"

iperf_server() {  # addr port
  iperf3 -s -B "$1" -p "$2" >/dev/null 2>&1 &
  PIDS+=($!)
}
iperf_server 203.0.113.1 5201
iperf_server 198.51.100.1 5202
sleep 1

# wire rate (Mbit/s) of a transfer: goodput * (MTU + 14) / MSS, as the buckets charge it
transfer() {  # ns gw port reverse(0/1) -> "wire_mbps goodput_mbps retransmits"
  local rflag=""; [ "$4" = 1 ] && rflag="-R"
  timeout -k 5 $((SECS + 20)) ip netns exec "$1" iperf3 -c "$2" -p "$3" -O 1 -t "$SECS" -J $rflag ${CC:+-C "$CC"} > "$W/iperf.json"
  jq -r '[(.end.sum_received.bits_per_second * 1514 / .start.tcp_mss_default / 1e6),
          (.end.sum_received.bits_per_second / 1e6), (.end.sum_sent.retransmits // 0)] | map(tostring) | join(" ")' "$W/iperf.json"
}
ping_stats() {  # ns gw count -> "avg max loss%"
  local out
  out=$(ip netns exec "$1" ping -n -q -c "$3" -i 0.1 -W 2 "$2" 2>&1 || true)
  local loss rtt
  loss=$(echo "$out" | sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p')
  rtt=$(echo "$out" | sed -n 's/^rtt [^=]*= \([0-9.]*\)\/\([0-9.]*\)\/\([0-9.]*\)\/.*/\2 \3/p')
  echo "${rtt:-- -} ${loss:-100}"
}
loaded_ping() {  # ns gw port reverse -> ping stats while a stream saturates that direction
  local rflag=""; [ "$4" = 1 ] && rflag="-R"
  timeout -k 5 $((SECS + 20)) ip netns exec "$1" iperf3 -c "$2" -p "$3" -t $((SECS + 2)) $rflag ${CC:+-C "$CC"} >/dev/null 2>&1 &
  local load=$!
  sleep 1.5
  ping_stats "$1" "$2" $((SECS * 10))
  wait "$load" || true
}

printf '\nbandwidth bench: rate %s bit/s, burst %s bits, %s s transfers (1 s warm-up omitted), tcp cc %s, kernel %s\n' \
  "$RATE" "$BURST" "$SECS" "${CC:-$(sysctl -n net.ipv4.tcp_congestion_control)}" "$(uname -r)"
printf '%-10s %-12s %-28s %-30s %-30s\n' impl direction "rate wire/goodput Mbit/s (retr)" "ping idle avg/max ms (loss%)" "ping loaded avg/max ms (loss%)"
for impl in plumb reference; do
  if [ $impl = plumb ]; then ns=bw-plumb; gw=203.0.113.1; port=5201; else ns=bw-ref; gw=198.51.100.1; port=5202; fi
  idle=$(ping_stats $ns $gw 20)
  for dir in egress ingress; do
    rev=0; [ $dir = ingress ] && rev=1
    read -r wire good retr <<<"$(transfer $ns $gw $port $rev)"
    read -r lavg lmax lloss <<<"$(loaded_ping $ns $gw $port $rev)"
    read -r iavg imax iloss <<<"$idle"
    printf '%-10s %-12s %-28s %-30s %-30s\n' $impl "pod $dir" "$(printf '%.1f / %.1f (%s)' "$wire" "$good" "$retr")" \
      "$iavg / $imax ($iloss)" "$lavg / $lmax ($lloss)"
  done
done

# Tear down as a runtime would (reverse chain order for the reference).
plumb_cni DEL >/dev/null
echo "$REF_BW" | ref_env DEL /usr/lib/cni/bandwidth >/dev/null
echo "$REF_BRIDGE" | ref_env DEL /usr/lib/cni/bridge >/dev/null
