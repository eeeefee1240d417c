"""The object store of the Kubernetes API test server (kube_api_test_server.py; see its docstring
for what the server serves): which resources exist and where their objects live, the objects in
JSON files with a cache, JSON merge patches (RFC 7386) and JSON patches (RFC 6902 with the
json-patch library's semantics), and the fault rules of <dir>/faults.json. Python standard
library only; no HTTP here."""
import copy
import json
import os
import re
import threading

LOCK = threading.RLock()
CLUSTER = "_cluster"  # the namespace directory of cluster-scoped objects
# (group, version, plural) -> (directory, namespaced)
RESOURCES = {
    ("", "v1", "pods"): ("pods", True),
    ("", "v1", "nodes"): ("nodes", False),
    ("k8s.cni.cncf.io", "v1", "network-attachment-definitions"): ("network-attachment-definitions", True),
    ("k8s.cni.cncf.io", "v1alpha1", "ipamclaims"): ("ipamclaims", True),
    ("whereabouts.cni.cncf.io", "v1alpha1", "ippools"): ("ippools", True),
    ("whereabouts.cni.cncf.io", "v1alpha1", "overlappingrangeipreservations"): ("overlappingrangeipreservations", True),
    ("whereabouts.cni.cncf.io", "v1alpha1", "nodeslicepools"): ("nodeslicepools", True),
    ("events.k8s.io", "v1", "events"): ("events", True),
}
KINDS = {"pods": "Pod", "nodes": "Node", "network-attachment-definitions": "NetworkAttachmentDefinition",
         "ipamclaims": "IPAMClaim", "ippools": "IPPool",
         "overlappingrangeipreservations": "OverlappingRangeIPReservation", "nodeslicepools": "NodeSlicePool",
         "events": "Event"}
NAME = r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?"
PATH_RE = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[a-z0-9.-]+)/(?P<version>v[a-z0-9]+))"
    r"(?:/namespaces/(?P<ns>[a-z0-9-]+))?/(?P<res>[a-z-]+)(?:/(?P<name>" + NAME + r")(?:/(?P<sub>status))?)?$"
)


class PatchError(Exception):
    pass


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


def pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"bad path {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def json_patch(doc, ops):
    """RFC 6902 add/remove/replace/test with evanphx/json-patch's semantics. The result shares
    what no operation touches with `doc`; only the containers on the operations' paths are
    copied (a pool of thousands of allocations is not copied whole for one added slot), so `doc`
    is unchanged whatever happens."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations")
    if not isinstance(doc, dict):
        raise PatchError("the object is not a JSON object")
    new = dict(doc)
    copied = {id(new)}

    def parent(tokens):
        cur = new
        for t in tokens[:-1]:
            if isinstance(cur, dict) and t in cur:
                k = t
            elif isinstance(cur, list) and t.isdigit() and int(t) < len(cur):
                k = int(t)
            else:
                return None
            nxt = cur[k]
            if isinstance(nxt, (dict, list)) and id(nxt) not in copied:
                nxt = dict(nxt) if isinstance(nxt, dict) else list(nxt)
                cur[k] = nxt
                copied.add(id(nxt))
            cur = nxt
        return cur

    for op in ops:
        kind, tokens = op.get("op"), pointer(op.get("path", ""))
        if not tokens:
            raise PatchError("operations on the whole document are not served")
        par, key = parent(tokens), tokens[-1]
        if par is None or not isinstance(par, (dict, list)):
            raise PatchError(f"{kind} operation does not apply: doc is missing path: {op.get('path')}")
        value = op.get("value")
        if isinstance(par, list):
            patch_list(par, key, kind, value, op.get("path"))
            continue
        present = key in par
        if kind == "add":
            par[key] = value
        elif kind in ("remove", "replace"):
            if not present:
                raise PatchError(f"{kind} operation does not apply: doc is missing key: {op.get('path')}")
            if kind == "remove":
                del par[key]
            else:
                par[key] = value
        elif kind == "test":
            val = par.get(key)
            if (val is None and value is not None) or (val is not None and val != value):
                raise PatchError(f"testing value {op.get('path')} failed")
        else:
            raise PatchError(f"operation {kind!r} is not served")
    return new


def patch_list(par, key, kind, value, path):
    if key == "-" and kind == "add":
        par.append(value)
        return
    if not key.isdigit() or int(key) > len(par) or (kind != "add" and int(key) >= len(par)):
        if kind == "test" and value is None:
            return
        raise PatchError(f"{kind}: index {key} out of range in {path}")
    idx = int(key)
    if kind == "add":
        par.insert(idx, value)
    elif kind == "remove":
        par.pop(idx)
    elif kind == "replace":
        par[idx] = value
    elif kind == "test":
        if par[idx] != value:
            raise PatchError(f"testing value {path} failed")
    else:
        raise PatchError(f"operation {kind!r} is not served")


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


class Store:
    """Objects in files, cached by (mtime, size, inode): a large pool is parsed once per change."""

    def __init__(self, root):
        self.root = root
        self.cache = {}  # path -> (stamp, obj, bytes)

    def path(self, res, ns, name):
        return os.path.join(self.root, "objects", res, ns, name + ".json")

    @staticmethod
    def stamp(path):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def load(self, path):
        """(object, its JSON bytes), or (None, None). Callers must not modify the object."""
        st = self.stamp(path)
        if st is None:
            self.cache.pop(path, None)
            return None, None
        hit = self.cache.get(path)
        if hit and hit[0] == st:
            return hit[1], hit[2]
        try:
            with open(path, "rb") as f:
                raw = f.read()
            obj = json.loads(raw)
        except (OSError, ValueError):
            return None, None
        data = json.dumps(obj, separators=(",", ":")).encode()
        if self.stamp(path) == st:  # not rewritten while read (a test editing the file)
            self.cache[path] = (st, obj, data)
        return obj, data

    def save(self, path, obj):
        data = json.dumps(obj, separators=(",", ":")).encode()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        self.cache[path] = (self.stamp(path), obj, data)
        return data

    def remove(self, path):
        self.cache.pop(path, None)
        os.remove(path)

    def items(self, res, namespaces):
        out = []
        for ns in namespaces:
            d = os.path.join(self.root, "objects", res, ns)
            if not os.path.isdir(d):
                continue
            for f in sorted(os.listdir(d)):
                if f.endswith(".json"):
                    obj, _ = self.load(os.path.join(d, f))
                    if obj is not None:
                        out.append(obj)
        return out


class WatchLog:
    """The history of one resource that watches are served from. The objects are files tests
    edit directly, so changes are found by scanning them (their stamps): the first scan (at the
    first list or watch of the resource) takes the objects as they are (the history starts there); every later one logs ADDED, MODIFIED and DELETED events with a
    resourceVersion above every earlier one (an object whose own metadata.resourceVersion is not
    above them gets a new one, written into its file). `floor`: events at or below it are
    compacted away (a watch from there gets 410 Expired)."""

    def __init__(self, store, res, next_rv, bump_rv, now):
        self.store, self.res, self.next_rv, self.bump_rv = store, res, next_rv, bump_rv
        self.known = None  # (ns, name) -> (stamp, obj)
        self.events = []   # (rv, type, obj)
        self.floor = now   # the history starts at the first list or watch
        self.watched = False  # scanned from the first watch on (kube_api_test_server.Server.listed)

    def files(self):
        base = os.path.join(self.store.root, "objects", self.res)
        out = {}
        for ns in (sorted(os.listdir(base)) if os.path.isdir(base) else []):
            for f in sorted(os.listdir(os.path.join(base, ns))):
                if f.endswith(".json"):
                    out[(ns, f[:-5])] = self.store.path(self.res, ns, f[:-5])
        return out

    def scan(self):
        """Logs what changed since the last scan (call with LOCK held)."""
        files = self.files()
        first = self.known is None
        known = {} if first else self.known
        last = self.events[-1][0] if self.events else self.floor
        for key, path in files.items():
            st = self.store.stamp(path)
            old = known.get(key)
            if old is not None and old[0] == st:
                continue
            obj, _ = self.store.load(path)
            if obj is None:
                continue
            if first:
                known[key] = (st, obj)
                continue
            rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            if rv.isdigit() and int(rv) > last:
                self.bump_rv(int(rv))
            else:
                obj = copy.deepcopy(obj)
                obj.setdefault("metadata", {})["resourceVersion"] = self.next_rv()
                self.store.save(path, obj)
                st = self.store.stamp(path)
            last = int(obj["metadata"]["resourceVersion"])
            self.events.append((last, "ADDED" if old is None else "MODIFIED", obj))
            known[key] = (st, obj)
        for key in [k for k in known if k not in files]:
            obj = copy.deepcopy(known.pop(key)[1])
            obj.setdefault("metadata", {})["resourceVersion"] = rv = self.next_rv()
            last = int(rv)
            self.events.append((last, "DELETED", obj))
        self.known = known
        if len(self.events) > 10000:
            self.floor = self.events[-5000][0]
            self.events = self.events[-5000:]

    def changed(self, ns, name):
        """Whether the object's file differs from what the last scan saw (call with LOCK held)."""
        if self.known is None:
            return False
        old = self.known.get((ns, name))
        return (old[0] if old else None) != self.store.stamp(self.store.path(self.res, ns, name))

    def compact(self, rv):
        self.floor = max(self.floor, rv)
        self.events = [e for e in self.events if e[0] > rv]

    def current(self):
        return [obj for _, obj in (self.known or {}).values()]
