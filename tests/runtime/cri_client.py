#!/usr/bin/python3
"""The kubelet side of tests/runtime/containerd_test.sh: a small CRI v1 client (Debian's
python3-grpcio, messages compiled by protoc from tests/runtime/cri_api.proto) and the scenario it
drives through containerd with plumb as the CNI plugin. Run only inside that script's private
network + mount namespace.

  cri_client.py image OUT.tar REF        write a docker-archive image REF: static busybox, sleeping
  cri_client.py wait SOCKET              wait (at most 30 s) until the CRI answers Version
  cri_client.py scenario SOCKET WORK     the test (exit 0 when every check passed)
  cri_client.py hotplug SOCKET WORK API  the hot-plug test, plumb's daemon watching the API test
                                         server whose data directory is API
"""
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import time

SERVICE = "/runtime.v1.RuntimeService/"
POD = {"name": "web", "namespace": "default", "uid": "uid-web-1"}
SELECTION = "blue,green"
HOST_PORT, CONTAINER_PORT = 30080, 8080
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


# ---- the sandbox image -------------------------------------------------------------------------

def build_image(out, ref):
    """A docker-archive (docker.v1.2) image whose only layer is /bin/busybox (static) and whose
    entrypoint sleeps: the pause container of the test's sandboxes (nothing can be pulled here)."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        d = tarfile.TarInfo("bin")
        d.type, d.mode = tarfile.DIRTYPE, 0o755
        t.addfile(d)
        with open("/bin/busybox", "rb") as f:
            data = f.read()
        b = tarfile.TarInfo("bin/busybox")
        b.size, b.mode = len(data), 0o755
        t.addfile(b, io.BytesIO(data))
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Entrypoint": ["/bin/busybox", "sleep", "2147483647"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref], "Layers": ["layer/layer.tar"]}]).encode()
    with tarfile.open(out, "w") as t:
        for name, blob in ((config_name, config), ("layer/layer.tar", layer_bytes), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            t.addfile(info, io.BytesIO(blob))


# ---- CRI calls ---------------------------------------------------------------------------------

def cri(channel, pb, method, request, response_type, timeout=60):
    call = channel.unary_unary(SERVICE + method, request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=getattr(pb, response_type).FromString)
    return call(request, timeout=timeout)


def connect(sock):
    import grpc  # Debian's python3-grpcio
    sys.path.insert(0, os.environ["CRI_PB_DIR"])
    import cri_api_pb2 as pb
    return grpc.insecure_channel("unix://" + sock), pb


def wait(sock):
    channel, pb = connect(sock)
    deadline = time.time() + 30
    while True:
        try:
            v = cri(channel, pb, "Version", pb.VersionRequest(version="v1"), "VersionResponse", timeout=2)
            print("CRI: %s %s (API %s)" % (v.runtime_name, v.runtime_version, v.runtime_api_version))
            return 0
        except Exception as e:  # not up yet
            if time.time() > deadline:
                print("containerd's CRI did not answer within 30 s: %s" % e)
                return 1
            time.sleep(0.2)


def run_sandbox(channel, pb, attempt, cgroup_parent):
    cfg = pb.PodSandboxConfig(hostname="web", linux=pb.LinuxPodSandboxConfig(cgroup_parent=cgroup_parent))
    cfg.metadata.name, cfg.metadata.namespace, cfg.metadata.uid = POD["name"], POD["namespace"], POD["uid"]
    cfg.metadata.attempt = attempt
    cfg.annotations["k8s.v1.cni.cncf.io/networks"] = SELECTION
    cfg.port_mappings.add(protocol=pb.TCP, container_port=CONTAINER_PORT, host_port=HOST_PORT)
    return cri(channel, pb, "RunPodSandbox", pb.RunPodSandboxRequest(config=cfg), "RunPodSandboxResponse").pod_sandbox_id


def sandbox_status(channel, pb, sid):
    resp = cri(channel, pb, "PodSandboxStatus", pb.PodSandboxStatusRequest(pod_sandbox_id=sid, verbose=True),
               "PodSandboxStatusResponse")
    info = json.loads(resp.info.get("info", "{}"))
    netns = ""
    for ns in info.get("runtimeSpec", {}).get("linux", {}).get("namespaces", []):
        if ns.get("type") == "network":
            netns = ns.get("path", "")
    return resp.status, netns


def stop(channel, pb, sid):
    cri(channel, pb, "StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=sid), "StopPodSandboxResponse")


def remove(channel, pb, sid):
    cri(channel, pb, "RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=sid), "RemovePodSandboxResponse")


# ---- what the kernel and plumb's files say ------------------------------------------------------

def sh(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def addresses(netns):
    """{ifname: [address/len, ...]} of the namespace at path `netns`."""
    out = sh("nsenter", "--net=" + netns, "ip", "-j", "addr", "show")
    links = json.loads(out.stdout or "[]")
    return {l["ifname"]: ["%s/%d" % (a["local"], a["prefixlen"]) for a in l.get("addr_info", [])
                          if a.get("scope") == "global"] for l in links}


def port_answers(netns):
    """A listener in the sandbox on CONTAINER_PORT; a client in namespace "client" (another host
    on the node's link) connects to the node's 192.0.2.1:HOST_PORT and must read its greeting."""
    server = subprocess.Popen(["nsenter", "--net=" + netns, "/usr/bin/python3", "-c",
                               "import socket,sys\n"
                               "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                               "s.bind(('0.0.0.0', %d)); s.listen(1); s.settimeout(20); print('up', flush=True)\n"
                               "c,_=s.accept(); c.sendall(b'hello from the sandbox'); c.close()\n" % CONTAINER_PORT],
                              stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()  # listening
        for _ in range(20):
            out = sh("ip", "netns", "exec", "client", "/usr/bin/python3", "-c",
                     "import socket\n"
                     "c=socket.create_connection(('192.0.2.1', %d), timeout=3); print(c.recv(100).decode())" % HOST_PORT)
            if out.returncode == 0:
                return out.stdout.strip() == "hello from the sandbox"
            time.sleep(0.1)
        return False
    finally:
        server.kill()
        server.wait()


def status_file(work):
    base = os.path.join(work, "store", "status", POD["namespace"], POD["name"])
    try:
        with open(base + ".json") as f:
            status = json.load(f)
        with open(base + ".owner") as f:
            # "<container ID>:<CNI_IFNAME>" (attachments are keyed by both, as the CNI spec says).
            owner = f.read().strip().split(":")[0]
        return status, owner
    except FileNotFoundError:
        return None, None


def teardowns(work, sid):
    """How often containerd tore down the sandbox's network (each a CNI DEL through plumb)."""
    with open(os.path.join(work, "containerd.log")) as f:
        return f.read().count('TearDown network for sandbox \\"%s\\" successfully' % sid)


# ---- the scenario ------------------------------------------------------------------------------

def check_sandbox(channel, pb, work, sid):
    st, netns = sandbox_status(channel, pb, sid)
    check(st.state == pb.SANDBOX_READY, "sandbox %s is ready" % sid[:12])
    check(st.network.ip.startswith("203.0.113."), "CRI reports the default network's address (%s)" % st.network.ip)
    addrs = addresses(netns)
    check(set(addrs) == {"lo", "eth0", "net1", "net2"}, "the sandbox has lo, eth0, net1, net2: %s" % sorted(addrs))
    check(any(a.startswith("203.0.113.") and a.endswith("/24") for a in addrs.get("eth0", [])), "eth0 has 203.0.113.x/24")
    check(any(a.startswith("198.51.100.") and a.endswith("/24") for a in addrs.get("net1", [])), "net1 (blue) has 198.51.100.x/24")
    check(any(a.startswith("2001:db8:1::") and a.endswith("/64") for a in addrs.get("net2", [])), "net2 (green) has 2001:db8:1::x/64")
    check(str(HOST_PORT) in sh("nft", "list", "ruleset").stdout, "the host port is mapped in nftables")
    check(port_answers(netns), "host port %d answers from the sandbox's port %d" % (HOST_PORT, CONTAINER_PORT))
    status, owner = status_file(work)
    check(status is not None and [e["name"] for e in status] == ["default-net", "default/blue", "default/green"],
          "network-status lists the three networks")
    check(owner == sid, "network-status belongs to sandbox %s" % sid[:12])
    return netns


def scenario(sock, work):
    channel, pb = connect(sock)
    cgroup_parent = os.environ["CRI_CGROUP_PARENT"]
    s1 = run_sandbox(channel, pb, 0, cgroup_parent)
    netns1 = check_sandbox(channel, pb, work, s1)

    stop(channel, pb, s1)
    check(not os.path.exists(netns1), "StopPodSandbox removed the sandbox's network namespace")
    check(status_file(work)[0] is None, "its DEL removed its network-status")

    # The pod's next sandbox; then the old one is removed, and containerd sends its DEL again.
    s2 = run_sandbox(channel, pb, 1, cgroup_parent)
    check_sandbox(channel, pb, work, s2)
    remove(channel, pb, s1)
    check(teardowns(work, s1) == 2, "RemovePodSandbox sent the stopped sandbox's DEL again")
    status, owner = status_file(work)
    check(status is not None and len(status) == 3 and owner == s2,
          "the second sandbox keeps its network-status after the old sandbox's DEL")

    stop(channel, pb, s2)
    remove(channel, pb, s2)
    left = cri(channel, pb, "ListPodSandbox", pb.ListPodSandboxRequest(), "ListPodSandboxResponse").items
    check(len(left) == 0, "no sandbox left")
    return 0 if not FAILURES else 1


def put_pod(api, networks):
    """The pod's object in the API test server (node-1), with selection `networks`; its
    network-status, when plumb wrote one, is kept."""
    path = os.path.join(api, "objects", "pods", POD["namespace"], POD["name"] + ".json")
    try:
        with open(path) as f:
            pod = json.load(f)
    except FileNotFoundError:
        pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"},
               "metadata": {"name": POD["name"], "namespace": POD["namespace"], "uid": POD["uid"], "annotations": {}}}
    pod["metadata"].setdefault("annotations", {})["k8s.v1.cni.cncf.io/networks"] = networks
    with open(path + ".tmp", "w") as f:
        json.dump(pod, f)
    os.rename(path + ".tmp", path)


def api_status(api):
    with open(os.path.join(api, "objects", "pods", POD["namespace"], POD["name"] + ".json")) as f:
        value = json.load(f)["metadata"].get("annotations", {}).get("k8s.v1.cni.cncf.io/network-status", "[]")
    return [e["name"] for e in json.loads(value)]


def until(cond, seconds=15):
    for _ in range(seconds * 10):
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def hotplug(sock, work, api):
    """A running sandbox follows its pod's selection annotation, changed in the API server."""
    channel, pb = connect(sock)
    put_pod(api, '[{"name": "blue", "interface": "net1"}, {"name": "green", "interface": "net2"}]')
    sid = run_sandbox(channel, pb, 0, os.environ["CRI_CGROUP_PARENT"])
    netns = sandbox_status(channel, pb, sid)[1]
    check(set(addresses(netns)) == {"lo", "eth0", "net1", "net2"}, "the sandbox has lo, eth0, net1, net2")
    put_pod(api, '[{"name": "blue", "interface": "net1"}, {"name": "green", "interface": "net2"}, {"name": "red", "interface": "net3"}]')
    check(until(lambda: any(a.startswith("2001:db8:2::") for a in addresses(netns).get("net3", []))),
          "net3 (red) was hot-plugged with its address")
    check(until(lambda: "default/red" in api_status(api)), "network-status lists default/red")
    put_pod(api, '[{"name": "blue", "interface": "net1"}, {"name": "red", "interface": "net3"}]')
    check(until(lambda: set(addresses(netns)) == {"lo", "eth0", "net1", "net3"}), "net2 (green) was hot-unplugged")
    check(until(lambda: "default/green" not in api_status(api)), "network-status no longer lists default/green")
    stop(channel, pb, sid)
    remove(channel, pb, sid)
    check(not os.path.exists(netns), "Stop/Remove removed the sandbox's network namespace")
    return 0 if not FAILURES else 1


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "image":
        build_image(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "wait":
        return wait(sys.argv[2])
    if len(sys.argv) == 4 and sys.argv[1] == "scenario":
        return scenario(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 5 and sys.argv[1] == "hotplug":
        return hotplug(sys.argv[2], sys.argv[3], sys.argv[4])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
