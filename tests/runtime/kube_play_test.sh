#!/usr/bin/env bash
# The thick DaemonSet as a cluster runs it: deploy/thick rendered by kustomize (as an operator
# applies it), its pod template run by `podman kube play` (both containers, their host mounts,
# host network and PID, privileged, the image deploy/build-image makes from this build), then a
# runtime's ADD and DEL through the plumb-shim its install container put on the "node", served by
# its daemon container, whose delegated primary network (tests/support/fake_cni_plugin.py, as
# Flannel or Calico) needs a file and an agent socket that only the node has: it finds them
# because the daemon runs it chrooted to /hostroot (the conflist's chrootDir).
# Everything happens in private network, mount and PID namespaces made here (the "node"): the
# node's /run, /opt, /var/lib, /etc/cni and bpffs are fresh mounts of this namespace, podman's
# storage is a scratch directory; nothing of the machine's is touched.
# The image is FROM scratch: plumb must be statically linked (the default build). A dynamic plumb
# (-DPLUMB_STATIC=OFF) fails the test, unless PLUMB_KUBE_PLAY_WITH_LIBS=1 (set by ctest for such a
# build) bundles its shared libraries into a test-only image.
set -euo pipefail
plumb=$(readlink -f "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${PLUMB_KUBE_PLAY_INNER:-}" ]; then
  exec unshare -n -m -p --fork --mount-proc --propagation private env PLUMB_KUBE_PLAY_INNER=1 bash "$0" "$plumb"
fi
build=$(dirname "$plumb")
kubectl=${PLUMB_KUBECTL:-/opt/plumb-tools/kubectl}
[ -x "$kubectl" ] || { echo "no $kubectl (scripts/install-deps installs it)"; exit 1; }
dynamic=0
readelf -l "$plumb" | grep -q 'Requesting program interpreter' && dynamic=1
if [ $dynamic = 1 ] && [ "${PLUMB_KUBE_PLAY_WITH_LIBS:-0}" != 1 ]; then
  echo "$plumb is dynamically linked; deploy/Containerfile (FROM scratch) needs the static build"
  exit 1
fi

ip link set lo up
work=$(mktemp -d /tmp/plumb-kube-play-XXXXXX)
podman_cmd() { podman --runtime runc "$@"; }
cleanup() {
  podman_cmd kube down "$work/pod.yaml" >/dev/null 2>&1 || true
  podman_cmd rm -af >/dev/null 2>&1 || true
  cd /; umount -l "$work" 2>/dev/null || true; rmdir "$work" 2>/dev/null || true
}
trap cleanup EXIT
mount -t tmpfs tmpfs "$work"
# The node's directories the DaemonSet mounts, fresh in this mount namespace ($kubectl and the
# scratch directory stay reachable: /opt/plumb-tools is bound back, /tmp is not covered).
tools=$(dirname "$kubectl")
mkdir -p "$work/tools" && mount --bind "$tools" "$work/tools" && kubectl="$work/tools/$(basename "$kubectl")"
for d in /run /opt /var/lib /etc/cni; do mount -t tmpfs tmpfs "$d"; done
mount -t bpf bpf /sys/fs/bpf
mkdir -p /run/netns /run/plumb /run/flannel /run/node-agent /etc/cni/net.d /opt/cni/bin /var/lib/cni
mount -t tmpfs tmpfs /run/netns && mount --make-shared /run/netns
mkdir -p "$work"/{root,runroot,tmp,records,stage}
cat >"$work/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$work/root"
runroot = "$work/runroot"
CONF
cat >"$work/containers.conf" <<CONF
[engine]
cgroup_manager = "cgroupfs"
events_logger = "none"
CONF
export CONTAINERS_CONF="$work/containers.conf" CONTAINERS_STORAGE_CONF="$work/storage.conf" TMPDIR="$work/tmp"

# The image, as deploy/build-image makes it (tag from deploy/image).
image=$(sed -n 's/^ *newName: *//p' "$root/deploy/image/kustomization.yaml"):$(sed -n 's/^ *newTag: *//p' "$root/deploy/image/kustomization.yaml")
if [ $dynamic = 0 ]; then
  "$root/deploy/build-image" "$build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
else
  stage="$work/stage"
  cp "$plumb" "$build/plumb-shim" "$stage/"
  mkdir -p "$stage/var" "$stage/usr/lib/x86_64-linux-gnu" "$stage/usr/lib64"
  ln -s ../run "$stage/var/run"
  for lib in $(ldd "$plumb" | awk '/=>/ {print $3}'); do cp -L "$lib" "$stage/usr/lib/x86_64-linux-gnu/"; done
  cp -L /lib64/ld-linux-x86-64.so.2 "$stage/usr/lib64/"
  ln -s usr/lib "$stage/lib" && ln -s usr/lib64 "$stage/lib64"
  sed 's|^ENTRYPOINT|COPY usr /usr\nCOPY lib /lib\nCOPY lib64 /lib64\nENTRYPOINT|' "$root/deploy/Containerfile" >"$work/Containerfile"
  podman_cmd build --pull=never -f "$work/Containerfile" -t "$image" "$stage" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
fi

# The node: a primary network whose plugin needs the node's files, and what only the node has.
cp "$root/tests/support/fake_cni_plugin.py" /opt/cni/bin/node-net
chmod 755 /opt/cni/bin/node-net
echo "FLANNEL_SUBNET=198.51.100.0/24" >/run/flannel/subnet.env
cat >/etc/cni/net.d/10-node.conflist <<JSON
{"cniVersion": "1.0.0", "name": "node-net", "plugins": [{"type": "node-net", "recordDir": "$work/records",
  "nodeFile": "/run/flannel/subnet.env", "agentSocket": "/run/node-agent/agent.sock"}]}
JSON
python3 - "$work/agent.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("/run/node-agent/agent.sock"); s.listen(4); s.settimeout(300)
for _ in range(2):
    c, _ = s.accept()
    line = c.makefile().readline().strip()
    c.sendall(("hello " + line.split(" ", 1)[1] + "\n").encode())
    c.close()
    open(sys.argv[1], "a").write(line + "\n")
PY
agent=$!

# The DaemonSet's pod template, from the rendered manifest, as a Pod for kube play.
"$kubectl" kustomize "$root/deploy/thick" >"$work/rendered.yaml"
python3 - "$work/rendered.yaml" "$work/pod.yaml" <<'PY'
import sys, yaml
ds = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "DaemonSet"][0]
spec = ds["spec"]["template"]["spec"]
# What the kubelet resolves itself: the downward API's spec.nodeName (podman does not know it).
for c in spec["containers"]:
    for e in c.get("env", []):
        if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            del e["valueFrom"]
            e["value"] = "kube-play-node"
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plumb", "labels": ds["spec"]["template"]["metadata"]["labels"]},
       "spec": spec}
yaml.safe_dump(pod, open(sys.argv[2], "w"))
PY
podman_cmd kube play "$work/pod.yaml" >"$work/play.log" 2>&1 || { cat "$work/play.log"; exit 1; }
for _ in $(seq 200); do [ -S /run/plumb/plumb.sock ] && [ -f /etc/cni/net.d/00-plumb.conflist ] && break; sleep 0.1; done
fail=0
[ -f /etc/cni/net.d/00-plumb.conflist ] || { echo "FAIL: the install container wrote no conflist"; fail=1; }
[ -S /run/plumb/plumb.sock ] || { echo "FAIL: the daemon container does not listen on /run/plumb/plumb.sock"; fail=1; }
if [ $fail = 0 ]; then
  # The daemon's probe, as the kubelet runs it.
  podman_cmd exec plumb-daemon /usr/local/bin/plumb-shim --probe >"$work/probe.out" 2>&1 || { echo "FAIL: plumb-shim --probe"; cat "$work/probe.out"; fail=1; }
  # A runtime's ADD and DEL through the installed shim, with the conflist's plugin entry.
  ip netns add pod1
  conf=$(python3 -c 'import json,sys; l=json.load(open("/etc/cni/net.d/00-plumb.conflist")); p=l["plugins"][0]; p["name"]=l["name"]; p["cniVersion"]=l["cniVersion"]; p["runtimeConfig"]={"io.kubernetes.cri.pod-annotations": {}}; print(json.dumps(p))')
  type=$(python3 -c 'import json; print(json.load(open("/etc/cni/net.d/00-plumb.conflist"))["plugins"][0]["type"])')
  run() { env -i PATH=/usr/bin:/bin CNI_COMMAND="$1" CNI_CONTAINERID=c1 CNI_NETNS=/var/run/netns/pod1 CNI_IFNAME=eth0 CNI_PATH=/opt/cni/bin \
          CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=uid-1" "/opt/cni/bin/$type" <<<"$conf"; }
  # Without the plumb binary beside the shim, only the daemon can serve (no fallback).
  mv /opt/cni/bin/plumb "$work/plumb.aside"
  if ! out=$(run ADD); then echo "FAIL: ADD: $out"; fail=1; fi
  echo "ADD: $out"
  ip -n pod1 -o link show eth0 >/dev/null 2>&1 || { echo "FAIL: no eth0 in the pod"; fail=1; }
  grep -q '"nodeFile": "FLANNEL_SUBNET=198.51.100.0/24' "$work"/records/*ADD.json 2>/dev/null || { echo "FAIL: the delegate did not read the node's file"; fail=1; }
  grep -q '"agentReply": "hello c1"' "$work"/records/*ADD.json 2>/dev/null || { echo "FAIL: the delegate did not reach the node's agent"; fail=1; }
  if ! out=$(run DEL); then echo "FAIL: DEL: $out"; fail=1; fi
  [ "$(ip -n pod1 -o link show | wc -l)" = 1 ] || { echo "FAIL: links left in the pod"; fail=1; }
  mv "$work/plumb.aside" /opt/cni/bin/plumb
  [ "$type" = plumb-shim ] || { echo "FAIL: the conflist names $type, not plumb-shim"; fail=1; }
  grep -q '"nodeName":"kube-play-node"' /etc/cni/net.d/00-plumb.conflist || { echo "FAIL: the conflist has not the node's name"; fail=1; }
  ip netns del pod1
fi
kill "$agent" 2>/dev/null || true
if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else
  podman_cmd logs plumb-install 2>&1 | tail -20; podman_cmd logs plumb-daemon 2>&1 | tail -20; echo "0 passed, 1 failed"; fi
exit $fail
