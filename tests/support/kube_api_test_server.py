#!/usr/bin/env python3
"""A small Kubernetes API *test* server for plumb's integration tests (Python standard library only).

It is not a Kubernetes API server: it serves just what plumb uses, from JSON files, with the
failure modes the tests need.

  objects    <dir>/objects/<resource>/<namespace>/<name>.json (cluster-scoped resources, nodes:
             namespace "_cluster"). Tests edit the files directly; the server caches each object
             by the file's (mtime, size, inode) and reads it again when that changes.
  resources  pods, nodes (cluster-scoped); k8s.cni.cncf.io network-attachment-definitions (v1),
             ipamclaims (v1alpha1); whereabouts.cni.cncf.io/v1alpha1 ippools,
             overlappingrangeipreservations, nodeslicepools; events.k8s.io/v1 events
  endpoints  GET    /api, /version
             GET    an object; a namespace's list; a list across namespaces (/api/v1/pods,
                    /apis/<group>/<version>/<resource>); nodes' list; lists page with ?limit=N
                    (metadata.continue: the offset of the next item, given back as &continue=);
                    ?fieldSelector=spec.nodeName=X
             GET    ...?watch=1: a watch (chunked, one JSON event a line) from resourceVersion,
                    bookmarks each 0.5 s with allowWatchBookmarks=true, ending after
                    timeoutSeconds. Changes are found by scanning the files every 50 ms from
                    the first watch of a resource (kube_api_store.WatchLog: the baseline is
                    the first list or watch, so nothing changed after a list is missed by a
                    watch from its version; an edited file gets a new resourceVersion written
                    into it).
                    <dir>/watch-control.json {"drop": N, "compact": N, "hold": bool}: a new
                    "drop" value ends every open watch; a new "compact" value compacts the
                    history, so a watch from an older version gets an ERROR event 410 Expired;
                    "hold" keeps every change (and bookmark) back until it is false again.
             POST   a namespace's collection: create (409 AlreadyExists; metadata.uid,
                    resourceVersion, creationTimestamp, namespace set)
             PATCH  an object: application/merge-patch+json (RFC 7386; metadata.resourceVersion
                    and metadata.uid in the body are preconditions: 409 Conflict when they
                    differ) or application/json-patch+json (RFC 6902 add/remove/replace/test with
                    the semantics of the json-patch library the API server uses: testing a
                    missing member against null succeeds; any failed operation is 422 Invalid and
                    changes nothing)
             PUT    an object: replace, metadata.resourceVersion required and must match (409)
             DELETE an object: DeleteOptions preconditions uid/resourceVersion (409); 404 if absent
             PATCH|PUT .../pods/{name}/status and .../ipamclaims/{name}/status: only "metadata"
                    and "status" are applied (as before)
             A successful write bumps metadata.resourceVersion (one counter for the server).
  TLS        certificates are made with `openssl` at start under <dir>/tls: ca.crt/ca.key,
             server.crt/key (SAN IP:127.0.0.1, and the --host address), client.crt/key (signed
             by the CA).
  listen     --host (default 127.0.0.1): another address of the test's namespace lets a second
             node namespace, linked to it, reach the server.
  auth       a request is authenticated by a bearer token listed in <dir>/tokens (one per line,
             re-read on every request) or by a client certificate signed by the CA; else 401.
  faults     <dir>/faults.json, re-read on every request: a list of rules
               {"match": "<regex on 'METHOD /path'>", "action": "delay|drop|cut|fail|bump_rv",
                "seconds": 2.5, "code": 503, "times": N}
             delay: wait before answering; drop: close the connection without an answer; cut:
             send the answer's headers and half its body, then close the connection (logged
             as status CUT);
             fail: answer `code` with a Status (409: reason Conflict); bump_rv: after answering a
             GET, bump the object's resourceVersion (another writer). "times" limits how often a
             rule fires (counted from the last change of the file; default unlimited).
  log        every request is appended to <dir>/requests.log as "METHOD /path STATUS AUTH"; every
             watch event sent to <dir>/watch-events.log as "TYPE resource ns/name resourceVersion";
             every TLS connection accepted (its handshake done) to <dir>/connections.log as
             "TLS address:port".
  start      the chosen port is written to <dir>/port once the server listens.
  latency    --latency-ms N: every request waits N ms (fractions allowed) before it is handled, as
             if the server were that many milliseconds of round trip away (a watch: before its
             first line; its later events are not held). plumb-bench uses it (bench/README.md).

This file is the HTTP side (TLS, authentication, routing, the answers); the objects' files,
the patches and the fault rules are in kube_api_store.py beside it.
"""
import argparse
import copy
import datetime
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The store, patches and faults are in kube_api_store.py beside this script (the script's own
# directory is first on sys.path). No __pycache__ in the source tree the tests run it from.
sys.dont_write_bytecode = True
from kube_api_store import (  # noqa: E402
    CLUSTER, KINDS, LOCK, NAME, PATH_RE, RESOURCES, Faults, PatchError, Store, WatchLog, json_patch, merge_patch)


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certs(tls, host):
    os.makedirs(tls, exist_ok=True)
    if os.path.exists(os.path.join(tls, "client.crt")):
        return
    p = lambda n: os.path.join(tls, n)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "2", "-subj", "/CN=plumb-test-ca")
    for name, subj, ext in (
        ("server", "/CN=kube-apiserver",
         "subjectAltName=IP:127.0.0.1,DNS:localhost" + ("" if host == "127.0.0.1" else ",IP:" + host)
         + "\nextendedKeyUsage=serverAuth"),
        ("client", "/O=system:nodes/CN=system:node:plumb-test", "extendedKeyUsage=clientAuth"),
    ):
        openssl("req", "-new", *ec, "-keyout", p(name + ".key"), "-out", p(name + ".csr"), "-subj", subj)
        with open(p(name + ".ext"), "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-out", p(name + ".crt"), "-days", "2", "-extfile", p(name + ".ext"))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, handler, root, ctx):
        super().__init__(addr, handler)
        self.root = root
        self.ctx = ctx
        self.faults = Faults(os.path.join(root, "faults.json"))
        self.store = Store(root)
        self.rv = int(time.time() * 1000)  # a restarted server issues only newer versions
        self.logs = {}  # resource -> WatchLog, from the first list or watch of it
        self.latency = 0.0  # seconds every request waits (--latency-ms)

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    def bump_rv(self, rv):
        self.rv = max(self.rv, rv)

    def log(self, res):
        """The resource's WatchLog, scanned (with LOCK held); a watch of it from now on."""
        log = self.listed(res)
        log.watched = True
        log.scan()
        return log

    def listed(self, res):
        """The resource's WatchLog for a list (with LOCK held): its history starts at the first
        list or watch, so a change made between a list and the first watch from the list's
        resourceVersion is an event of that watch. Scanned only once watched: the objects of a
        resource nothing watches keep the resourceVersions their files say."""
        if res not in self.logs:
            self.logs[res] = WatchLog(self.store, res, self.next_rv, self.bump_rv, self.rv)
            self.logs[res].scan()  # the first scan: the baseline, no event
        log = self.logs[res]
        if log.watched:
            log.scan()
        return log

    def watch_control(self):
        """<dir>/watch-control.json: {"drop": N, "compact": N}; a change of "drop" ends every
        open watch, of "compact" compacts every log to the current resourceVersion."""
        try:
            with open(os.path.join(self.root, "watch-control.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def finish_request(self, request, client_address):
        # TLS handshake in the worker thread: a slow client never blocks accept().
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            request.close()
            return
        with LOCK, open(os.path.join(self.root, "connections.log"), "a") as f:
            f.write(f"TLS {client_address[0]}:{client_address[1]}\n")
        try:
            self.RequestHandlerClass(request, client_address, self)
        finally:
            try:
                request.close()
            except OSError:
                pass


def selected(obj, query):
    """Whether `obj` passes the query's fieldSelector (spec.nodeName=X, the only field served)."""
    sel = query.get("fieldSelector", [""])[0]
    if not sel:
        return True
    field, _, value = sel.partition("=")
    value = value.lstrip("=")
    if field != "spec.nodeName":
        return False
    return (obj.get("spec") or {}).get("nodeName") == value


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, fmt, *args):  # quiet
        pass

    def setup(self):
        # Headers and body go out in two writes: without TCP_NODELAY the body waits for the
        # client's delayed ACK of the headers (40 ms per answer).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    # ---- helpers ----
    def record(self, status, who):
        with LOCK:
            with open(os.path.join(self.server.root, "requests.log"), "a") as f:
                f.write(f"{self.command} {self.path} {status} {who}\n")

    def send_bytes(self, code, body, who):
        cut = getattr(self, "cut", False)
        # Logged before answering: a client that got the answer finds it logged.
        self.record("CUT" if cut else code, who)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not cut:
            self.wfile.write(body)
            return
        self.wfile.write(body[:len(body) // 2])
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def send_json(self, code, obj, who):
        self.send_bytes(code, json.dumps(obj).encode(), who)

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

    def bump(self, path):
        with LOCK:
            obj, _ = self.server.store.load(path)
            if obj is None:
                return
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {})["resourceVersion"] = str(int(obj["metadata"].get("resourceVersion", "1")) + 1000)
            self.server.store.save(path, obj)

    def apply_faults(self):
        """Runs the fault rules; True when one answered (or dropped) the request."""
        self.bump_after = False
        self.cut = False
        for r in self.server.faults.matching(f"{self.command} {self.path}"):
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
                return True
            elif act == "fail":
                code = int(r.get("code", 500))
                reason = {409: "Conflict", 422: "Invalid", 429: "TooManyRequests"}.get(code, "InternalError")
                self.status(code, reason, f"injected failure {code}", "-")
                return True
            elif act == "cut":
                self.cut = True
            elif act == "bump_rv":
                self.bump_after = True
        return False

    # ---- dispatch ----
    def handle_any(self):
        length = int(self.headers.get("Content-Length", "0") or 0)
        self.body = self.rfile.read(length) if length else b""
        if self.server.latency > 0:
            time.sleep(self.server.latency)
        if self.apply_faults():
            return
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
        res, namespaced = RESOURCES[key]
        ns, name, sub = m.group("ns"), m.group("name"), m.group("sub")
        if not namespaced:
            if ns is not None:
                return self.status(404, "NotFound", f"{res} is not namespaced", who)
            ns = CLUSTER
        if name is None:
            return self.collection(res, ns, namespaced, who)
        opath = self.server.store.path(res, ns, name)
        if sub == "status":
            if res not in ("pods", "ipamclaims") or self.command not in ("PATCH", "PUT"):
                return self.status(405, "MethodNotAllowed", f"{self.command} {path} is not served", who)
            return self.write_status(res, name, opath, who)
        if self.command == "GET":
            with LOCK:
                log = self.server.logs.get(res)
                if log is not None and log.watched and log.changed(ns, name):
                    # A file a test edited gets its new resourceVersion before a client reads it,
                    # never between the read and a write that has that version as precondition.
                    log.scan()
                obj, data = self.server.store.load(opath)
            if obj is None:
                return self.status(404, "NotFound", f'{res} "{name}" not found', who)
            if self.bump_after:
                self.bump(opath)  # the client gets the old version: its resourceVersion is stale
            return self.send_bytes(200, data, who)
        if self.command in ("PATCH", "PUT"):
            return self.update(res, name, opath, who)
        if self.command == "DELETE":
            return self.delete(res, name, opath, who)
        return self.status(405, "MethodNotAllowed", f"{self.command} {path} is not served by this test server", who)

    def collection(self, res, ns, namespaced, who):
        store = self.server.store
        query = urllib.parse.parse_qs(self.path.split("?", 1)[1]) if "?" in self.path else {}
        if self.command == "GET" and query.get("watch", [""])[0] in ("1", "true"):
            return self.watch(res, ns, query, who)
        if self.command == "GET":
            with LOCK:
                self.server.listed(res)  # the list's resourceVersion follows the log
            if ns is None:  # every namespace
                d = os.path.join(self.server.root, "objects", res)
                namespaces = sorted(os.listdir(d)) if os.path.isdir(d) else []
            else:
                namespaces = [ns]
            with LOCK:
                items = [o for o in store.items(res, namespaces) if selected(o, query)]
            meta = {"resourceVersion": str(self.server.rv)}
            if "limit" in query:  # pages: the continue token is the offset of the next item
                start = int(query.get("continue", ["0"])[0])
                end = start + int(query["limit"][0])
                if end < len(items):
                    meta["continue"] = str(end)
                items = items[start:end]
            return self.send_json(200, {"kind": KINDS[res] + "List", "apiVersion": "v1", "metadata": meta, "items": items}, who)
        if self.command != "POST" or (namespaced and ns is None):
            return self.status(405, "MethodNotAllowed", "method not allowed", who)
        try:
            obj = json.loads(self.body or b"{}")
        except ValueError:
            return self.status(400, "BadRequest", "body is not JSON", who)
        meta = obj.setdefault("metadata", {}) if isinstance(obj, dict) else None
        name = meta.get("name") if meta is not None else None
        if not isinstance(name, str) or not re.fullmatch(NAME, name) or len(name) > 253:
            return self.status(422, "Invalid", f"metadata.name: Invalid value: {name!r}", who)
        opath = store.path(res, ns, name)
        with LOCK:
            if store.load(opath)[0] is not None:
                return self.status(409, "AlreadyExists", f'{res} "{name}" already exists', who)
            if namespaced:
                meta["namespace"] = ns
            meta["uid"] = str(uuid.uuid4())
            meta["resourceVersion"] = self.server.next_rv()
            meta["creationTimestamp"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            data = store.save(opath, obj)
        return self.send_bytes(201, data, who)

    def update(self, res, name, opath, who):
        try:
            doc = json.loads(self.body or b"null")
        except ValueError:
            return self.status(400, "BadRequest", "body is not JSON", who)
        ctype = self.headers.get("Content-Type", "")
        store = self.server.store
        with LOCK:
            obj, _ = store.load(opath)
            if obj is None:
                return self.status(404, "NotFound", f'{res} "{name}" not found', who)
            meta = obj.get("metadata", {})
            conflict = ("Operation cannot be fulfilled on " + res + ' "' + name +
                        '": the object has been modified; please apply your changes to the latest version and try again')
            if self.command == "PATCH" and ctype == "application/json-patch+json":
                try:
                    new = json_patch(obj, doc)
                except PatchError as e:
                    return self.status(422, "Invalid", f"the server rejected our request due to an error in our request: {e}", who)
            elif self.command == "PATCH" and ctype == "application/merge-patch+json":
                want = doc.get("metadata", {}) if isinstance(doc, dict) else {}
                if "uid" in want and want["uid"] != meta.get("uid"):
                    return self.status(409, "Conflict", f'Precondition failed: UID in precondition: {want["uid"]}', who)
                if "resourceVersion" in want and want["resourceVersion"] != meta.get("resourceVersion"):
                    return self.status(409, "Conflict", conflict, who)
                part = copy.deepcopy(doc) if isinstance(doc, dict) else {}
                part.get("metadata", {}).pop("resourceVersion", None)
                part.get("metadata", {}).pop("uid", None)
                new = merge_patch(copy.deepcopy(obj), part)
            elif self.command == "PUT":
                rv = (doc.get("metadata", {}) if isinstance(doc, dict) else {}).get("resourceVersion")
                if rv is None:
                    return self.status(422, "Invalid", "metadata.resourceVersion: must be specified for an update", who)
                if rv != meta.get("resourceVersion"):
                    return self.status(409, "Conflict", conflict, who)
                new = copy.deepcopy(doc)
            else:
                return self.status(415, "UnsupportedMediaType", f"content type {ctype!r} is not served", who)
            nmeta = dict(new.get("metadata") or {})  # never the stored object's own dict
            new["metadata"] = nmeta
            for k in ("name", "namespace", "uid", "creationTimestamp"):
                if k in meta:
                    nmeta[k] = meta[k]
            nmeta["resourceVersion"] = self.server.next_rv()
            data = store.save(opath, new)
        return self.send_bytes(200, data, who)

    def delete(self, res, name, opath, who):
        try:
            opts = json.loads(self.body) if self.body else {}
        except ValueError:
            return self.status(400, "BadRequest", "body is not JSON", who)
        pre = opts.get("preconditions", {}) if isinstance(opts, dict) else {}
        store = self.server.store
        with LOCK:
            obj, _ = store.load(opath)
            if obj is None:
                return self.status(404, "NotFound", f'{res} "{name}" not found', who)
            meta = obj.get("metadata", {})
            for k in ("uid", "resourceVersion"):
                if k in pre and pre[k] != meta.get(k):
                    return self.status(409, "Conflict", f"Precondition failed: {k} in precondition: {pre[k]}, "
                                                        f"{k} in object meta: {meta.get(k)}", who)
            store.remove(opath)
        return self.send_json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success",
                                    "details": {"name": name, "kind": res}}, who)

    def watch(self, res, ns, query, who):
        """A watch: newline-delimited events in a chunked answer, from resourceVersion (every
        object as ADDED when it is "" or "0"), a BOOKMARK each 0.5 s when asked for, an ERROR
        410 Expired event for a compacted version; ends after timeoutSeconds, at a "drop" of
        watch-control.json, or when the client goes."""
        since = query.get("resourceVersion", [""])[0]
        bookmarks = query.get("allowWatchBookmarks", [""])[0] == "true"
        end = time.monotonic() + float(query.get("timeoutSeconds", ["1800"])[0])
        drop = self.server.watch_control().get("drop")
        self.record(200, who)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        kind = KINDS[res]

        def send(events):
            data = b"".join(json.dumps({"type": t, "object": o}, separators=(",", ":")).encode() + b"\n" for t, o in events)
            with LOCK, open(os.path.join(self.server.root, "watch-events.log"), "a") as f:
                for t, o in events:
                    m = o.get("metadata") or {}
                    f.write(f"{t} {res} {m.get('namespace', '')}/{m.get('name', '')} {m.get('resourceVersion', '')}\n")
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        def mine(obj):
            return (ns is None or (obj.get("metadata") or {}).get("namespace") == ns) and selected(obj, query)

        try:
            with LOCK:
                log = self.server.log(res)
                if since in ("", "0"):
                    first = [("ADDED", o) for o in log.current() if mine(o)]
                    pos = self.server.rv
                elif int(since) < log.floor:
                    first = [("ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": f"too old resource version: {since} ({log.floor})",
                                        "reason": "Expired", "code": 410})]
                    end = 0
                else:
                    pos = int(since)
                    first = []
            send(first)
            last_bookmark = time.monotonic()
            while time.monotonic() < end:
                control = self.server.watch_control()
                if control.get("drop") != drop:
                    break
                with LOCK:
                    log = self.server.log(res)
                    if "compact" in control and control["compact"] != getattr(log, "compacted", None):
                        log.compacted = control["compact"]
                        log.compact(self.server.rv)
                    if pos < log.floor:
                        send([("ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                         "message": f"too old resource version: {pos} ({log.floor})",
                                         "reason": "Expired", "code": 410})])
                        break
                    # Read again under the lock that orders the store's changes: a "hold" written
                    # before a change is then always seen before that change is.
                    held = bool(self.server.watch_control().get("hold"))  # changes (and bookmarks) kept back
                    events = [] if held else [(t, o) for rv, t, o in log.events if rv > pos and mine(o)]
                    if not held:
                        pos = max([pos] + [rv for rv, _, _ in log.events])
                    now = self.server.rv
                send(events)
                if bookmarks and not held and time.monotonic() - last_bookmark >= 0.5:
                    send([("BOOKMARK", {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": str(now)}})])
                    pos = max(pos, now)
                    last_bookmark = time.monotonic()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, ValueError):
            pass

    def write_status(self, res, name, opath, who):
        try:
            doc = json.loads(self.body or b"{}")
        except ValueError:
            return self.status(400, "BadRequest", "body is not JSON", who)
        if self.command == "PATCH" and self.headers.get("Content-Type") != "application/merge-patch+json":
            return self.status(415, "UnsupportedMediaType", "only application/merge-patch+json", who)
        store = self.server.store
        with LOCK:
            obj, _ = store.load(opath)
            if obj is None:
                return self.status(404, "NotFound", f'{res} "{name}" not found', who)
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            want = doc.get("metadata", {}) if isinstance(doc, dict) else {}
            if "uid" in want and want["uid"] != meta.get("uid"):
                return self.status(409, "Conflict", f'Precondition failed: UID in precondition: {want["uid"]}, '
                                                    f'UID in object meta: {meta.get("uid")}', who)
            if "resourceVersion" in want and want["resourceVersion"] != meta.get("resourceVersion"):
                return self.status(409, "Conflict", "Operation cannot be fulfilled on " + res + ' "' + name +
                                   '": the object has been modified; please apply your changes to the latest version and try again', who)
            if self.command == "PUT" and "resourceVersion" not in want:
                return self.status(422, "Invalid", "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update", who)
            part = {k: v for k, v in doc.items() if k in ("metadata", "status")}
            part.get("metadata", {}).pop("resourceVersion", None)
            part.get("metadata", {}).pop("uid", None)
            if self.command == "PUT":
                obj["status"] = part.get("status", {})
                obj["metadata"]["annotations"] = part.get("metadata", {}).get("annotations", {})
            else:
                obj = merge_patch(obj, part)
            obj["metadata"]["resourceVersion"] = self.server.next_rv()
            data = store.save(opath, obj)
        return self.send_bytes(200, data, who)

    do_GET = handle_any
    do_PATCH = handle_any
    do_PUT = handle_any
    do_POST = handle_any
    do_DELETE = handle_any


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--latency-ms", type=float, default=0.0)
    a = ap.parse_args()
    root = os.path.abspath(a.dir)
    os.makedirs(os.path.join(root, "objects"), exist_ok=True)
    tls = os.path.join(root, "tls")
    make_certs(tls, a.host)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(tls, "server.crt"), os.path.join(tls, "server.key"))
    ctx.load_verify_locations(os.path.join(tls, "ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    srv = Server((a.host, a.port), Handler, root, ctx)
    srv.latency = a.latency_ms / 1000.0
    signal.signal(signal.SIGTERM, lambda *_: (srv.server_close(), os._exit(0)))
    with open(os.path.join(root, "port.tmp"), "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(os.path.join(root, "port.tmp"), os.path.join(root, "port"))
    srv.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    sys.exit(main())
