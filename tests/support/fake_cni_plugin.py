#!/usr/bin/python3
# A test-only CNI plugin of a type plumb does not implement, so plumb delegates to it. Tests copy
# it into a private bin directory under a type name of their choice. It records every invocation
# (its whole initial environment, stdin, open descriptors) and builds a real veth pair with iproute2:
#   ADD    "<host>" (fk + 10 hex digits of sha1(containerID/ifname)) in the node namespace, its
#          peer named "podIfname" (default CNI_IFNAME) in CNI_NETNS with "address" when given;
#          returns prevResult (when chained) plus its interfaces and address
#   DEL    deletes "<host>" (missing is fine)
#   CHECK  fails unless "<host>" exists and prevResult was given
#   GC, STATUS, VERSION  recorded only ("statusCode": fail STATUS with that code)
# Config keys (besides the CNI ones): recordDir (required), podIfname, address ("192.0.2.10/24"),
# sleepBeforeAdd (seconds, after recording), hangOn ("ADD"...: print to stderr, then sleep until
# killed), hangOnce (as hangOn, only in the first call of that command recorded in recordDir),
# failOn ("ADD"...: a CNI error, code 117), and what a primary network's plugin needs
# from its node (Flannel's subnet.env, Calico's or Cilium's agent socket): nodeFile (a path read
# at ADD), agentSocket (a unix socket path: ADD sends "ADD <CNI_CONTAINERID>" and reads a line),
# recorded as "nodeFile" and "agentReply" (code 11, before any record, when either fails). Run as
# a delegated IPAM, it gets its parent plugin's whole config and reads these keys from its "ipam" object.
import hashlib
import json
import os
import socket
import subprocess
import sys
import time


def from_node(conf, version):
    found = {}
    if conf.get("nodeFile"):
        try:
            with open(conf["nodeFile"]) as f:
                found["nodeFile"] = f.read()
        except OSError as e:
            fail(11, "cannot read %s: %s" % (conf["nodeFile"], e.strerror), version)
    if conf.get("agentSocket"):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(30)
                s.connect(conf["agentSocket"])
                s.sendall(("ADD %s\n" % os.environ["CNI_CONTAINERID"]).encode())
                found["agentReply"] = s.makefile().readline().strip()
        except OSError as e:
            fail(11, "cannot talk to the agent at %s: %s" % (conf["agentSocket"], e.strerror or e), version)
    return found


def record(conf, command, stdin_text, found):
    env = {}
    with open("/proc/self/environ", "rb") as f:  # the environment as given, before Python's own changes
        for item in f.read().split(b"\0"):
            if item:
                k, _, v = item.partition(b"=")
                env[k.decode()] = v.decode()
    entry = {"command": command, "env": env, "stdin": stdin_text, "fds": sorted(os.listdir("/proc/self/fd")),
             "pid": os.getpid(), "time": time.time()}
    entry.update(found)
    name = "%019d-%d-%s.json" % (time.time_ns(), os.getpid(), command)
    path = os.path.join(conf["recordDir"], name)
    with open(path + ".tmp", "w") as f:
        json.dump(entry, f)
    os.rename(path + ".tmp", path)


def ip(*args, netns=None):
    cmd = (["nsenter", "--net=" + netns] if netns else []) + ["ip"] + list(args)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def host_name(ifname):
    digest = hashlib.sha1((os.environ["CNI_CONTAINERID"] + "/" + ifname).encode()).hexdigest()
    return "fk" + digest[:10]


def fail(code, msg, version):
    print(json.dumps({"cniVersion": version, "code": code, "msg": msg}))
    sys.exit(1)


def add(conf, version):
    netns = os.environ["CNI_NETNS"]
    pod_if = conf.get("podIfname", os.environ["CNI_IFNAME"])
    host = host_name(pod_if)
    ip("link", "add", host, "type", "veth", "peer", "name", pod_if, "netns", netns)
    ip("link", "set", host, "up")
    if conf.get("address"):
        ip("addr", "add", conf["address"], "dev", pod_if, netns=netns)
    ip("link", "set", pod_if, "up", netns=netns)
    mac = json.loads(ip("-j", "link", "show", pod_if, netns=netns))[0]["address"]
    result = conf.get("prevResult") or {}
    result["cniVersion"] = version
    interfaces = result.setdefault("interfaces", [])
    interfaces.append({"name": host})
    interfaces.append({"name": pod_if, "mac": mac, "sandbox": netns})
    if conf.get("address"):
        entry = {"address": conf["address"], "interface": len(interfaces) - 1}
        if version in ("0.3.0", "0.3.1", "0.4.0"):
            entry["version"] = "6" if ":" in conf["address"] else "4"
        result.setdefault("ips", []).append(entry)
    print(json.dumps(result))


def main():
    command = os.environ.get("CNI_COMMAND", "")
    stdin_text = sys.stdin.read()
    if command == "VERSION":
        print(json.dumps({"cniVersion": "1.1.0", "supportedVersions": ["0.3.1", "0.4.0", "1.0.0", "1.1.0"]}))
        return
    whole = json.loads(stdin_text)
    conf = whole if "recordDir" in whole else dict(whole.get("ipam", {}), prevResult=whole.get("prevResult"))
    version = whole.get("cniVersion", "0.1.0")
    record(conf, command, stdin_text, from_node(conf, version) if command == "ADD" else {})
    first = len([n for n in os.listdir(conf["recordDir"]) if n.endswith("-%s.json" % command)]) == 1
    if conf.get("hangOn") == command or (conf.get("hangOnce") == command and first):
        sys.stderr.write("fake-cni: hanging on purpose in %s\n" % command)
        sys.stderr.flush()
        time.sleep(3600)
    if conf.get("failOn") == command:
        sys.stderr.write("fake-cni: failing on purpose\n")
        fail(117, "fake-cni failed %s on purpose" % command, version)
    if command == "ADD":
        time.sleep(float(conf.get("sleepBeforeAdd", 0)))
        add(conf, version)
    elif command == "DEL":
        pod_if = conf.get("podIfname", os.environ["CNI_IFNAME"])
        subprocess.run(["ip", "link", "del", host_name(pod_if)], capture_output=True)
    elif command == "CHECK":
        pod_if = conf.get("podIfname", os.environ["CNI_IFNAME"])
        if not conf.get("prevResult"):
            fail(7, "CHECK without prevResult", version)
        if subprocess.run(["ip", "link", "show", host_name(pod_if)], capture_output=True).returncode != 0:
            fail(100, "host end %s is missing" % host_name(pod_if), version)
    elif command == "STATUS" and conf.get("statusCode"):
        fail(int(conf["statusCode"]), "fake-cni is not ready", version)


main()
