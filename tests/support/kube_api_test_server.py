#!/usr/bin/env python3
"""A small Kubernetes API *test* server for plumb's integration tests (Python standard library only).

It is not a Kubernetes API server: it serves just what plumb uses, from JSON files, with the
failure modes the tests need.

  objects    <dir>/objects/<resource>/<namespace>/<name>.json, read on every request
             (resource: pods, network-attachment-definitions, ipamclaims). Tests edit them directly.
  endpoints  GET  /api, /version
             GET  /api/v1/namespaces/{ns}/pods/{name}
             PATCH|PUT /api/v1/namespaces/{ns}/pods/{name}/status
             GET  /apis/k8s.cni.cncf.io/v1/namespaces/{ns}/network-attachment-definitions[/{name}]
             GET  /apis/k8s.cni.cncf.io/v1alpha1/namespaces/{ns}/ipamclaims/{name}
             PATCH|PUT /apis/k8s.cni.cncf.io/v1alpha1/namespaces/{ns}/ipamclaims/{name}/status
             PATCH takes a JSON merge patch (RFC 7386); metadata.resourceVersion and metadata.uid in
             the body are preconditions (409 Conflict when they differ); a successful write bumps
             metadata.resourceVersion. On /status only "metadata" and "status" are applied.
  TLS        certificates are made with `openssl` at start under <dir>/tls: ca.crt/ca.key,
             server.crt/key (SAN IP:127.0.0.1), client.crt/key (signed by the CA).
  auth       a request is authenticated by a bearer token listed in <dir>/tokens (one per line,
             re-read on every request) or by a client certificate signed by the CA; else 401.
  faults     <dir>/faults.json, re-read on every request: a list of rules
               {"match": "<regex on 'METHOD /path'>", "action": "delay|drop|fail|bump_rv",
                "seconds": 2.5, "code": 503, "times": N}
             delay: wait before answering; drop: close the connection without an answer;
             fail: answer `code` with a Status; bump_rv: after answering, bump the object's
             resourceVersion (another writer) as it answers. "times" limits how often a rule fires (counted
             from the last change of the file; default unlimited).
  log        every request is appended to <dir>/requests.log as "METHOD /path STATUS AUTH".
  start      the chosen port is written to <dir>/port once the server listens.
"""
import argparse
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
RESOURCES = {
    ("", "v1", "pods"): "pods",
    ("k8s.cni.cncf.io", "v1", "network-attachment-definitions"): "network-attachment-definitions",
    ("k8s.cni.cncf.io", "v1alpha1", "ipamclaims"): "ipamclaims",
}
PATH_RE = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[a-z0-9.-]+)/(?P<version>v[a-z0-9]+))"
    r"/namespaces/(?P<ns>[a-z0-9-]+)/(?P<res>[a-z-]+)(?:/(?P<name>[a-z0-9.-]+)(?:/(?P<sub>status))?)?$"
)


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certs(tls):
    os.makedirs(tls, exist_ok=True)
    if os.path.exists(os.path.join(tls, "client.crt")):
        return
    p = lambda n: os.path.join(tls, n)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "2", "-subj", "/CN=plumb-test-ca")
    for name, subj, ext in (
        ("server", "/CN=kube-apiserver", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth"),
        ("client", "/O=system:nodes/CN=system:node:plumb-test", "extendedKeyUsage=clientAuth"),
    ):
        openssl("req", "-new", *ec, "-keyout", p(name + ".key"), "-out", p(name + ".csr"), "-subj", subj)
        with open(p(name + ".ext"), "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-out", p(name + ".crt"), "-days", "2", "-extfile", p(name + ".ext"))


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


class Faults:
    def __init__(self, path):
        self.path = path
        self.stamp = None
        self.fired = {}

    def matching(self, line):
        """Rules that fire for this request (their counters consumed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        with LOCK:
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            if stamp != self.stamp:
                self.stamp, self.fired = stamp, {}
            try:
                with open(self.path) as f:
                    rules = json.load(f)
            except (OSError, ValueError):
                return []
            out = []
            for i, r in enumerate(rules):
                if not re.search(r.get("match", ""), line):
                    continue
                times = r.get("times")
                if times is not None and self.fired.get(i, 0) >= times:
                    continue
                self.fired[i] = self.fired.get(i, 0) + 1
                out.append(r)
            return out


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, root, ctx):
        super().__init__(addr, handler)
        self.root = root
        self.ctx = ctx
        self.faults = Faults(os.path.join(root, "faults.json"))
        self.rv = int(time.time())

    def finish_request(self, request, client_address):
        # TLS handshake in the worker thread: a slow client never blocks accept().
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            request.close()
            return
        try:
            self.RequestHandlerClass(request, client_address, self)
        finally:
            try:
                request.close()
            except OSError:
                pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, fmt, *args):  # quiet
        pass

    # ---- helpers ----
    def record(self, status, who):
        with LOCK:
            with open(os.path.join(self.server.root, "requests.log"), "a") as f:
                f.write(f"{self.command} {self.path} {status} {who}\n")

    def send_json(self, code, obj, who):
        body = json.dumps(obj).encode()
        self.record(code, who)  # before answering: a client that got the answer finds it logged
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def status(self, code, reason, message, who):
        self.send_json(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason, "code": code}, who)

    def authenticate(self):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):].strip()
            try:
                with open(os.path.join(self.server.root, "tokens")) as f:
                    valid = {line.strip() for line in f if line.strip()}
            except FileNotFoundError:
                valid = set()
            return "token" if token in valid else None
        cert = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
        if cert:
            return "cert"
        return None

    def object_path(self, res, ns, name):
        return os.path.join(self.server.root, "objects", res, ns, name + ".json")

    def load(self, path):
        try:
            with open(path) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def save(self, path, obj):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1)
        os.replace(tmp, path)

    def bump(self, path):
        with LOCK:
            obj = self.load(path)
            if obj is None:
                return
            obj.setdefault("metadata", {})["resourceVersion"] = str(int(obj["metadata"].get("resourceVersion", "1")) + 1000)
            self.save(path, obj)

    # ---- dispatch ----
    def handle_any(self):
        length = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(length) if length else b""
        line = f"{self.command} {self.path}"
        rules = self.server.faults.matching(line)
        bump_after = False
        for r in rules:
            act = r.get("action")
            if act == "delay":
                time.sleep(float(r.get("seconds", 1)))
            elif act == "drop":
                self.record("DROP", "-")
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            elif act == "fail":
                code = int(r.get("code", 500))
                return self.status(code, "InternalError", f"injected failure {code}", "-")
            elif act == "bump_rv":
                bump_after = True
        who = self.authenticate()
        if who is None:
            return self.status(401, "Unauthorized", "Unauthorized", "-")
        path = self.path.split("?", 1)[0]
        if path in ("/api", "/version"):
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"]} if path == "/api"
                                  else {"major": "1", "minor": "30", "gitVersion": "v1.30.0-plumb-test"}, who)
        m = PATH_RE.match(path)
        key = (m.group("group") or "", m.group("core") or m.group("version"), m.group("res")) if m else None
        if not m or key not in RESOURCES:
            return self.status(404, "NotFound", f"the server could not find the requested resource {path}", who)
        res, ns, name, sub = RESOURCES[key], m.group("ns"), m.group("name"), m.group("sub")
        if name is None:
            if self.command != "GET":
                return self.status(405, "MethodNotAllowed", "method not allowed", who)
            d = os.path.join(self.server.root, "objects", res, ns)
            items = []
            if os.path.isdir(d):
                for f in sorted(os.listdir(d)):
                    if f.endswith(".json"):
                        items.append(self.load(os.path.join(d, f)))
            return self.send_json(200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items}, who)
        opath = self.object_path(res, ns, name)
        if self.command == "GET" and sub is None:
            obj = self.load(opath)
            if obj is None:
                return self.status(404, "NotFound", f'{res} "{name}" not found', who)
            if bump_after:
                self.bump(opath)  # the client gets the old version: its resourceVersion is stale
            return self.send_json(200, obj, who)
        if self.command in ("PATCH", "PUT") and sub == "status":
            try:
                doc = json.loads(body or b"{}")
            except ValueError:
                return self.status(400, "BadRequest", "body is not JSON", who)
            if self.command == "PATCH" and self.headers.get("Content-Type") != "application/merge-patch+json":
                return self.status(415, "UnsupportedMediaType", "only application/merge-patch+json", who)
            with LOCK:
                obj = self.load(opath)
                if obj is None:
                    code, answer = 404, None
                else:
                    meta = obj.setdefault("metadata", {})
                    want = doc.get("metadata", {}) if isinstance(doc, dict) else {}
                    if "uid" in want and want["uid"] != meta.get("uid"):
                        code, answer = 409, f'Precondition failed: UID in precondition: {want["uid"]}, UID in object meta: {meta.get("uid")}'
                    elif "resourceVersion" in want and want["resourceVersion"] != meta.get("resourceVersion"):
                        code, answer = 409, ("Operation cannot be fulfilled on " + res + ' "' + name +
                                             '": the object has been modified; please apply your changes to the latest version and try again')
                    elif self.command == "PUT" and "resourceVersion" not in want:
                        code, answer = 422, "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
                    else:
                        part = {k: v for k, v in doc.items() if k in ("metadata", "status")}
                        part.get("metadata", {}).pop("resourceVersion", None)
                        part.get("metadata", {}).pop("uid", None)
                        if self.command == "PUT":
                            obj["status"] = part.get("status", {})
                            obj["metadata"]["annotations"] = part.get("metadata", {}).get("annotations", {})
                        else:
                            obj = merge_patch(obj, part)
                        self.server.rv += 1
                        obj["metadata"]["resourceVersion"] = str(self.server.rv)
                        self.save(opath, obj)
                        code, answer = 200, obj
            if code == 404:
                return self.status(404, "NotFound", f'{res} "{name}" not found', who)
            if code == 409:
                return self.status(409, "Conflict", answer, who)
            if code == 422:
                return self.status(422, "Invalid", answer, who)
            return self.send_json(200, answer, who)
        return self.status(405, "MethodNotAllowed", f"{self.command} {path} is not served by this test server", who)

    do_GET = handle_any
    do_PATCH = handle_any
    do_PUT = handle_any
    do_POST = handle_any
    do_DELETE = handle_any


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    root = os.path.abspath(a.dir)
    os.makedirs(os.path.join(root, "objects"), exist_ok=True)
    tls = os.path.join(root, "tls")
    make_certs(tls)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(tls, "server.crt"), os.path.join(tls, "server.key"))
    ctx.load_verify_locations(os.path.join(tls, "ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    srv = Server(("127.0.0.1", a.port), Handler, root, ctx)
    signal.signal(signal.SIGTERM, lambda *_: (srv.server_close(), os._exit(0)))
    with open(os.path.join(root, "port.tmp"), "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(os.path.join(root, "port.tmp"), os.path.join(root, "port"))
    srv.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    sys.exit(main())
