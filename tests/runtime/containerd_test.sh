#!/usr/bin/env bash
# A real Kubernetes runtime drives plumb: Debian's containerd (1.6, CRI v1, runc) with plumb as its
# CNI plugin, driven through its CRI gRPC API as kubelet drives it (tests/runtime/cri_client.py).
# Everything happens inside a private network + mount + PID namespace made here (the "node"):
# containerd's root, state and sockets, /run (shims, netns mounts), libcni's cache and plumb's
# files live on tmpfs mounts of that namespace; sandbox cgroups go under a cgroup parent of this
# run, removed at the end; the kernel ends every process left in the PID namespace when the
# script's shell, its first process, exits (however it ends).
# plumb is installed by `plumb install` around the node's primary config (a native bridge +
# portmap); the sandbox image is built here from the static busybox and imported with ctr.
# Checks (cri_client.py scenario): RunPodSandbox with the selection annotation and a port
# mapping gives eth0/net1/net2 with their addresses and a host port that answers from another
# namespace; Stop/Remove leave nothing; a second sandbox of the pod keeps its network-status
# when containerd re-sends the first one's DEL. Then (cri_client.py hotplug) plumb in thick
# mode, its daemon watching the pods of node-1 in the Kubernetes API test server: a running
# sandbox follows its pod's selection annotation changed there (an interface added, one
# removed), and Stop/Remove still leave nothing.
set -euo pipefail
plumb=$(readlink -f "$1")
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${PLUMB_CRI_INNER:-}" ]; then
  # The PID namespace ends every process started inside (shims, sandboxes) when its first process
  # exits, whatever happened; the sandboxes' cgroups are removed here once they are all gone.
  cgroup_parent=plumb-cri-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
  rc=0
  unshare -n -m -p --fork --mount-proc --propagation private \
    env PLUMB_CRI_INNER=1 PLUMB_CRI_CGROUP="/$cgroup_parent" bash "$0" "$plumb" || rc=$?
  find /sys/fs/cgroup/*/"$cgroup_parent" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  exit $rc
fi
[ "$$" = 1 ] || { echo "not in a private PID namespace"; exit 1; }
for tool in containerd ctr containerd-shim-runc-v2 runc protoc nsenter; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (scripts/install-deps installs it)"; echo "0 passed, 1 failed"; exit 1; }
done
/usr/bin/python3 -c 'import grpc' 2>/dev/null || { echo "python3-grpcio is not installed"; echo "0 passed, 1 failed"; exit 1; }

ip link set lo up
work=$(mktemp -d /tmp/plumb-cri-XXXXXX)
mount -t tmpfs tmpfs "$work"
# This namespace's own /run (containerd's shim sockets, runc's state, /var/run/netns) and libcni cache.
mount -t tmpfs tmpfs /run
mkdir -p /run/netns /var/lib/cni
mount -t tmpfs tmpfs /var/lib/cni
cpid=""
cleanup() {
  set +e
  [ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null
  cd /
  umount -l "$work" /var/lib/cni /run 2>/dev/null
  rmdir "$work" 2>/dev/null
}
trap cleanup EXIT
mkdir -p "$work"/{cni-bin,net.d,store/nads,state,ipam,root,state-ctr,opt,py}
cp /usr/lib/cni/loopback "$work/cni-bin/"  # containerd itself runs "loopback" for every sandbox

# The node's primary CNI config, then plumb installed around it.
cat > "$work/net.d/10-default.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "default-net", "plugins": [
  {"type": "bridge", "bridge": "plumb0", "isGateway": true, "isDefaultGateway": true,
   "ipam": {"type": "host-local", "dataDir": "$work/ipam", "ranges": [[{"subnet": "203.0.113.0/24"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
"$plumb" install --cni-bin-dir "$work/cni-bin" --cni-conf-dir "$work/net.d" \
  --plugin-config "{\"storeDir\": \"$work/store\", \"stateDir\": \"$work/state\", \"logFile\": \"$work/plumb.log\", \"logLevel\": \"info\"}"
for net in "blue bridge br-blue 198.51.100.0/24" "green bridge br-green 2001:db8:1::/64"; do
  set -- $net
  cat > "$work/store/nads/$1.yaml" <<YAML
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: $1
  namespace: default
spec:
  config: '{"cniVersion": "1.0.0", "type": "$2", "bridge": "$3", "ipam": {"type": "host-local", "dataDir": "$work/ipam", "ranges": [[{"subnet": "$4"}]]}}'
YAML
done

# Another host on the node's link, from where the host port is reached.
ip netns add client
ip link add cl0 type veth peer name cl1 netns client
ip addr add 192.0.2.1/24 dev cl0 && ip link set cl0 up
ip -n client addr add 192.0.2.2/24 dev cl1 && ip -n client link set cl1 up && ip -n client link set lo up
ip -n client route add default via 192.0.2.1

cat > "$work/config.toml" <<TOML
version = 2
root = "$work/root"
state = "$work/state-ctr"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.overlayfs"]
[grpc]
  address = "$work/containerd.sock"
[ttrpc]
  address = "$work/containerd.sock.ttrpc"
[debug]
  level = "info"
[plugins."io.containerd.internal.v1.opt"]
  path = "$work/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/plumb-pause:1"
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true  # no lower oom_score_adj than containerd's: EACCES on these machines otherwise
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$work/cni-bin"
    conf_dir = "$work/net.d"
    max_conf_num = 1
TOML
containerd --config "$work/config.toml" >"$work/containerd.log" 2>&1 &
cpid=$!
export CRI_PB_DIR="$work/py" CRI_CGROUP_PARENT="$PLUMB_CRI_CGROUP"
protoc -I "$here" --python_out="$work/py" cri_api.proto
fail=0
/usr/bin/python3 "$here/cri_client.py" wait "$work/containerd.sock" || fail=1
if [ $fail = 0 ]; then
  /usr/bin/python3 "$here/cri_client.py" image "$work/pause.tar" localhost/plumb-pause:1
  ctr --address "$work/containerd.sock" -n k8s.io images import --snapshotter native "$work/pause.tar" >/dev/null || fail=1
fi
[ $fail = 0 ] && { /usr/bin/python3 "$here/cri_client.py" scenario "$work/containerd.sock" "$work" || fail=1; }

# Hot-plug: plumb in thick mode, `plumb daemon` watching the pods of node-1 in the Kubernetes API
# test server; the pod's selection annotation changed there while its sandbox runs.
apid=""; dpid=""
if [ $fail = 0 ]; then
  api="$work/api"
  mkdir -p "$api/objects/network-attachment-definitions/default" "$api/objects/pods/default"
  echo tok-1 > "$api/tokens"
  python3 "$here/../support/kube_api_test_server.py" --dir "$api" --port 0 --host 127.0.0.1 >"$api/server.log" 2>&1 &
  apid=$!
  for _ in $(seq 200); do [ -s "$api/port" ] && break; sleep 0.1; done
  cat > "$work/kubeconfig" <<YAML
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test-cluster
  cluster:
    server: https://127.0.0.1:$(cat "$api/port")
    certificate-authority-data: $(base64 -w0 "$api/tls/ca.crt")
contexts:
- name: test
  context:
    cluster: test-cluster
    user: plumb
users:
- name: plumb
  user:
    token: tok-1
YAML
  for net in "blue br-blue 198.51.100.0/24" "green br-green 2001:db8:1::/64" "red br-red 2001:db8:2::/64"; do
    set -- $net
    conf="{\"cniVersion\": \"1.0.0\", \"type\": \"bridge\", \"bridge\": \"$2\", \"ipam\": {\"type\": \"host-local\", \"dataDir\": \"$work/ipam\", \"ranges\": [[{\"subnet\": \"$3\"}]]}}"
    python3 -c 'import json,sys; print(json.dumps({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
      "metadata": {"name": sys.argv[1], "namespace": "default", "uid": "nad-" + sys.argv[1]}, "spec": {"config": sys.argv[2]}}))' \
      "$1" "$conf" > "$api/objects/network-attachment-definitions/default/$1.json"
  done
  # plumb's conflist in thick mode (what `plumb install --thick` writes, with the test server's
  # kubeconfig instead of the service account's): plumb-shim, installed beside plumb.
  cp "$(dirname "$plumb")/plumb-shim" "$work/cni-bin/"
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["plugins"][0].update(type="plumb-shim", kubeconfig=sys.argv[2]); json.dump(c, open(sys.argv[1] + ".tmp", "w"))' \
    "$work/net.d/00-plumb.conflist" "$work/kubeconfig" && mv "$work/net.d/00-plumb.conflist.tmp" "$work/net.d/00-plumb.conflist" || fail=1
  "$plumb" daemon --kubeconfig "$work/kubeconfig" --node-name node-1 --cni-config "$work/net.d/00-plumb.conflist" >"$work/daemon.log" 2>&1 &
  dpid=$!
  for _ in $(seq 200); do [ -S /run/plumb/plumb.sock ] && break; sleep 0.1; done
  [ -S /run/plumb/plumb.sock ] || { echo "FAIL: plumb daemon did not start"; cat "$work/daemon.log"; fail=1; }
  [ $fail = 0 ] && { /usr/bin/python3 "$here/cri_client.py" hotplug "$work/containerd.sock" "$work" "$api" || fail=1; }
  grep -E "interface|hot-plug" "$work/daemon.log" || true
  kill "$dpid" "$apid" 2>/dev/null; wait "$dpid" "$apid" 2>/dev/null || true
fi

# Nothing plumb made is left: no veth, no record, no address held, no sandbox namespace, no port mapping.
left=$(find "$work/state/containers" -type f 2>/dev/null | wc -l)
[ "$left" = 0 ] || { echo "FAIL: $left state records left"; fail=1; }
veths=$(ip -o link show type veth | grep -vc ' cl0@' || true)
[ "$veths" = 0 ] || { echo "FAIL: $veths veth links left"; ip -o link show type veth; fail=1; }
ipfiles=$(find "$work/ipam" -path '*/.plumb-recycled' -prune -o -type f ! -name lock ! -name 'last_reserved_ip*' -print | wc -l)  # not host-local's recycled files
[ "$ipfiles" = 0 ] || { echo "FAIL: $ipfiles IP files left"; fail=1; }
sandboxes=$(find /run/netns -name 'cni-*' | wc -l)
[ "$sandboxes" = 0 ] || { echo "FAIL: $sandboxes sandbox namespaces left"; fail=1; }
mappings=$(nft list ruleset 2>/dev/null | grep -c 30080 || true)
[ "$mappings" = 0 ] || { echo "FAIL: the host port is still mapped in nftables"; fail=1; }
[ $fail = 0 ] && echo "ok   nothing left after Stop/Remove"
if [ $fail = 0 ]; then
  echo "1 passed, 0 failed"
else
  echo "--- containerd.log"; tail -40 "$work/containerd.log"; echo "--- plumb.log"; cat "$work/plumb.log" 2>/dev/null
  echo "0 passed, 1 failed"
fi
exit $fail
