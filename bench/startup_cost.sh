#!/usr/bin/env bash
# Start-up and ADD cost of two plumb binaries for a pod WITHOUT device resources (no NAD with
# k8s.v1.cni.cncf.io/resourceName), e.g. before and after a change that adds a lazily loaded
# dependency: `plumb VERSION`, and an ADD+DEL pair of scenario (a) of bench/README.md (the default
# network: bridge + host-local), measured with hyperfine, the two binaries one after the other.
# Runs itself in a private network and mount namespace (the pod namespace and the bridge live
# there; nothing touches the machine's own). As root:
#   bench/startup_cost.sh OLD_PLUMB NEW_PLUMB [RUNS]
# Prints hyperfine's mean/min/max wall time and user/system CPU time of each; on a loaded machine
# compare the CPU times and the minimums.
set -euo pipefail
command -v hyperfine >/dev/null || { echo "$0 needs hyperfine (apt-get install hyperfine)" >&2; exit 2; }
if [ "${1:-}" != "--inside" ]; then
  [ $# -ge 2 ] || { echo "usage: $0 OLD_PLUMB NEW_PLUMB [RUNS]" >&2; exit 2; }
  exec unshare -n -m --propagation private "$0" --inside "$@"
fi
shift
old=$(readlink -f "$1"); new=$(readlink -f "$2"); runs=${3:-300}
ip link set lo up
mkdir -p /run/netns && mount -t tmpfs tmpfs /run/netns
d=$(mktemp -d /tmp/plumb-startup.XXXXXX)
trap 'ip netns del pod1 2>/dev/null || true; rm -rf "$d"' EXIT
mkdir -p "$d/store/nads" "$d/store/pods/default"
cat > "$d/default.conflist" <<J
{"cniVersion":"1.0.0","name":"default-net","plugins":[{"type":"bridge","bridge":"cni0","isGateway":true,
 "ipam":{"type":"host-local","dataDir":"$d/ipam","ranges":[[{"subnet":"198.51.100.0/24"}]]}}]}
J
cat > "$d/conf.json" <<J
{"cniVersion":"1.0.0","name":"plumb","type":"plumb","clusterNetwork":"$d/default.conflist","storeDir":"$d/store","stateDir":"$d/state"}
J
echo '{"cniVersion":"1.0.0"}' > "$d/version.json"
ip netns add pod1
export CNI_CONTAINERID=startup1 CNI_NETNS=/run/netns/pod1 CNI_IFNAME=eth0 CNI_PATH=/nonexistent
export CNI_ARGS="K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod1"
for b in "$old" "$new"; do  # both work here, and the node's bridge exists before measuring
  CNI_COMMAND=ADD "$b" < "$d/conf.json" > /dev/null
  CNI_COMMAND=DEL "$b" < "$d/conf.json" > /dev/null
done
echo "== VERSION"
hyperfine -N -w 50 -r "$runs" "sh -c 'CNI_COMMAND=VERSION $old < $d/version.json'" \
  "sh -c 'CNI_COMMAND=VERSION $new < $d/version.json'" 2>&1 | grep -E "Benchmark|Time|Range"
echo "== ADD+DEL, default network (bridge + host-local), no device resources"
hyperfine -N -w 10 -r "$runs" \
  "sh -c 'CNI_COMMAND=ADD $old < $d/conf.json >/dev/null && CNI_COMMAND=DEL $old < $d/conf.json >/dev/null'" \
  "sh -c 'CNI_COMMAND=ADD $new < $d/conf.json >/dev/null && CNI_COMMAND=DEL $new < $d/conf.json >/dev/null'" 2>&1 |
  grep -E "Benchmark|Time|Range"
if command -v perf >/dev/null; then
  # CPU time and page faults are steadier than wall time on a shared machine (page faults count
  # what start-up maps and touches: an embedded, unread shared object adds none). Interleaved in
  # five rounds so a change of load hits both binaries alike; the mean of the rounds is printed.
  per_round=$(( runs / 5 > 1 ? runs / 5 : 2 ))
  for what in VERSION ADD+DEL; do
    : > "$d/perf.$what.old"
    : > "$d/perf.$what.new"
    for round in 1 2 3 4 5; do
      for which in old new; do
        b=$old
        [ "$which" = new ] && b=$new
        if [ "$what" = VERSION ]; then
          CNI_COMMAND=VERSION perf stat -r "$per_round" -e task-clock,page-faults "$b" < "$d/version.json" 2>&1 >/dev/null
        else
          perf stat -r "$per_round" -e task-clock,page-faults sh -c \
            "CNI_COMMAND=ADD $b < $d/conf.json >/dev/null && CNI_COMMAND=DEL $b < $d/conf.json >/dev/null" 2>&1
        fi | awk '/task-clock/ {t=$1} /page-faults/ {p=$1} END {print t, p}' >> "$d/perf.$what.$which"
      done
    done
    for which in old new; do
      b=$old
      [ "$which" = new ] && b=$new
      awk -v w="$what" -v b="$b" '{t+=$1; p+=$2; n++} END {printf "%-8s %s: task-clock %.2f ms, page faults %.0f (mean of %d rounds)\n", w, b, t/n, p/n, n}' \
        "$d/perf.$what.$which"
    done
  done
fi
