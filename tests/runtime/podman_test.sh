#!/usr/bin/env bash
# A real runtime drives plumb: podman (Debian's, CNI backend, runc) runs a busybox container on a
# plumb network. Everything happens inside a private network + mount namespace made here: the
# "node" is that namespace, podman's storage and runroot live in a scratch directory.
# The container must see eth0 (the default network) and net1 (selected by its annotation in
# plumb's store); after the container is removed, nothing plumb made is left.
# With "thick" as the second argument, podman executes plumb-shim (beside the plumb binary) and
# `plumb daemon`, started here on the default socket (/run/plumb, a tmpfs of this namespace),
# must have served every invocation.
set -euo pipefail
plumb=$(readlink -f "$1")
mode=${2:-thin}
if [ -z "${PLUMB_PODMAN_INNER:-}" ]; then
  exec unshare -n -m --propagation private env PLUMB_PODMAN_INNER=1 bash "$0" "$plumb" "$mode"
fi
command -v podman >/dev/null || { echo "podman is not installed (scripts/install-deps installs it)"; exit 1; }
ip link set lo up
mkdir -p /run/netns && mount -t tmpfs tmpfs /run/netns
work=$(mktemp -d /tmp/plumb-podman-XXXXXX)
mount -t tmpfs tmpfs "$work"
daemon=
cleanup() {
  podman_cmd rm -af >/dev/null 2>&1 || true
  if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  cd /; umount -l "$work" 2>/dev/null || true; rmdir "$work" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$work"/{cni-bin,net.d,store/nads,store/pods/default,state,ipam,root,runroot,rootfs/bin,tmp}
cp "$plumb" "$work/cni-bin/plumb"
type=plumb
if [ "$mode" = thick ]; then
  cp "$(dirname "$plumb")/plumb-shim" "$work/cni-bin/plumb-shim"
  type=plumb-shim
  # 0755: the daemon refuses a socket directory others can write (a tmpfs is 1777 by default).
  mkdir -p /run/plumb && mount -t tmpfs -o mode=0755 tmpfs /run/plumb
  "$plumb" daemon --workers 1 --usage-log "$work/usage" >>"$work/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do [ -S /run/plumb/plumb.sock ] && break; sleep 0.05; done
  [ -S /run/plumb/plumb.sock ] || { echo "FAIL: plumb daemon did not listen"; cat "$work/daemon.log"; exit 1; }
fi

cat > "$work/default.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "default-net", "plugins": [
  {"type": "bridge", "bridge": "plumb0", "isGateway": true, "isDefaultGateway": true,
   "ipam": {"type": "host-local", "dataDir": "$work/ipam", "ranges": [[{"subnet": "203.0.113.0/24"}]]}}]}
JSON
cat > "$work/store/nads/blue.yaml" <<YAML
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: blue
  namespace: default
spec:
  config: '{"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-blue", "ipam": {"type": "host-local", "dataDir": "$work/ipam", "ranges": [[{"subnet": "198.51.100.0/24"}]]}}'
YAML
cat > "$work/store/pods/default/c1.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: c1
  namespace: default
  annotations:
    k8s.v1.cni.cncf.io/networks: blue
YAML
cat > "$work/net.d/plumbnet.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "plumbnet", "plugins": [
  {"type": "$type", "clusterNetwork": "$work/default.conflist", "storeDir": "$work/store",
   "stateDir": "$work/state", "logLevel": "info", "logFile": "$work/plumb.log",
   "capabilities": {"portMappings": true}}]}
JSON
cat > "$work/containers.conf" <<CONF
[network]
network_backend = "cni"
cni_plugin_dirs = ["$work/cni-bin"]
network_config_dir = "$work/net.d"
default_network = "plumbnet"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "none"
CONF
cat > "$work/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$work/root"
runroot = "$work/runroot"
CONF
export CONTAINERS_CONF="$work/containers.conf" CONTAINERS_STORAGE_CONF="$work/storage.conf" TMPDIR="$work/tmp"
podman_cmd() { podman --runtime runc "$@"; }

cp /bin/busybox "$work/rootfs/bin/busybox"
for t in sh ip cat ls sleep; do ln -s busybox "$work/rootfs/bin/$t"; done
tar -C "$work/rootfs" -c . | podman_cmd import - localhost/bb:latest >/dev/null

out=$(podman_cmd run --rm --name c1 --network plumbnet --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
      localhost/bb:latest ip -o addr show 2>&1) || { echo "podman run failed:"; echo "$out"; cat "$work/plumb.log" 2>/dev/null; exit 1; }
echo "$out"
fail=0
echo "$out" | grep -q 'eth0 *inet 203\.0\.113\.' || { echo "FAIL: no eth0 with the default network's address"; fail=1; }
echo "$out" | grep -q 'net1 *inet 198\.51\.100\.' || { echo "FAIL: no net1 from the annotation"; fail=1; }
# After the container is gone (podman ran DEL), nothing plumb made is left.
left=$(ls "$work/state/containers" 2>/dev/null | wc -l)
[ "$left" = 0 ] || { echo "FAIL: $left state records left"; fail=1; }
veths=$(ip -o link show type veth | wc -l)
[ "$veths" = 0 ] || { echo "FAIL: $veths veth links left"; fail=1; }
ipfiles=$(find "$work/ipam" -path '*/.plumb-recycled' -prune -o -type f ! -name lock ! -name 'last_reserved_ip*' -print | wc -l)  # not host-local's recycled files
[ "$ipfiles" = 0 ] || { echo "FAIL: $ipfiles IP files left"; fail=1; }
if [ "$mode" = thick ]; then
  # The shim runs the plumb beside it when no daemon answers: the daemon's log proves it served.
  served=$(grep -c '^pid=' "$work/usage" 2>/dev/null || true)
  [ "${served:-0}" -ge 2 ] || { echo "FAIL: the daemon served ${served:-0} invocations (ADD and DEL expected)"; cat "$work/daemon.log"; fail=1; }
  echo "invocations served by plumb daemon: $served"
fi
if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else cat "$work/plumb.log"; echo "0 passed, 1 failed"; fi
exit $fail
