#!/usr/bin/env python3
"""Every test file mirrors the source it tests, or is a declared suite across sources.

tests/<layer>/<path>_test.cpp tests <layer>/<path>.cpp (or .hpp, .c, .bpf.c). Where one source's
cases fill more than one file (the ~600-line rule), the others are <path>_<aspect>_test.cpp,
each aspect one of ASPECTS (a chain of them for a file that is two at once:
cluster_etcd_concurrency). A file that tests one behaviour of several sources is listed in
CROSS_CUTTING with what it covers; an entry naming no file fails too, so the list stays true.
Usage: mirror_test.py SOURCE_DIR
"""
import pathlib
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from tree import LIBRARIES, report, source_root, walk  # noqa: E402

SOURCE_SUFFIXES = [".cpp", ".hpp", ".c", ".bpf.c"]

# Aspect -> what the file holds of its source's tests.
ASPECTS = {
    "golden": "the bytes it builds, written out from the kernel's UAPI layouts; nothing sent",
    "kernel": "the kernel's own answer to what it sends, on this machine's kernel",
    "concurrency": "concurrent nodes (forked processes) calling it at once",
    "etcd": "against a real etcd",
    "binary": "through the real plumb binary, run as a runtime runs it",
    "parse": "its config parse alone: errors naming the key and value, no kernel",
    "claims": "IPAMClaim owners (the Network Plumbing WG standard's section 8)",
    "igb": "on the full-kernel guest's real SR-IOV NICs (QEMU's igb, the kernel's igb and igbvf)",
    "pod": "whole pods around it: traffic between them, kubelet's devices, chained plugins",
    "worker": "a daemon worker's invocations one after another: what it keeps across them and when it lets go",
}

# Test file (path under tests/ without _test.cpp) -> the behaviour it tests across sources.
CROSS_CUTTING = {
    "cni-entry/hostile_input": "hostile stdin, environment, annotations and NAD configs: every verb bounded, "
                               "a CNI error naming the field, the node unchanged",
    "cni-entry/symlink": "links planted where plumb writes (state, IPAM, network-status, device-info), umask 000",
    "cni-entry/static_binary": "the shipped binaries (plumb, plumb-shim) in an empty and a Debian 11 root",
    "cni-entry/pod/damaged_state": "every kind of damage to the records at every position, DEL and GC",
    "cni-entry/pod/lifecycle": "DEL total and idempotent, a SIGKILLed ADD undone by DEL, GC, CRI's repeated "
                               "ADD, full and read-only state directories, many pods at once",
    "cni-entry/pod/spine": "ADD, CHECK and DEL end to end through the binary: plan, attach, drivers, IPAM, "
                           "records, read back from the kernel",
    "cni-entry/pod/sriov_pod": "SR-IOV, InfiniBand and vDPA attachments end to end: kubelet's devices, "
                               "the VF drivers, fake sysfs",
    "cni-entry/pod/upgrade": "records written by an older plumb (tests/fixtures/state-v1) torn down by this one",
    "cni-entry/pod/downgrade": "records written by a newer plumb: unknown operations and formats kept, DEL exits 0",
}


def has_source(root, stem):
    return any((root / (stem + suffix)).is_file() for suffix in SOURCE_SUFFIXES)


def mirrors(root, name):
    """True when tests/<name>_test.cpp mirrors a source: <name> itself, or <source>_<aspect>..."""
    if has_source(root, name):
        return True
    stem, aspects = name, []
    while "_" in pathlib.PurePosixPath(stem).name:
        stem, aspect = stem.rsplit("_", 1)
        aspects.append(aspect)
        if all(a in ASPECTS for a in aspects) and has_source(root, stem):
            return True
    return False


def problems(root):
    found = []
    names = set()
    for layer in LIBRARIES:
        for f in walk(root / "tests" / layer, ("_test.cpp",)):
            name = f.relative_to(root / "tests").as_posix()[: -len("_test.cpp")]
            names.add(name)
            if name in CROSS_CUTTING or mirrors(root, name):
                continue
            found.append(f"tests/{name}_test.cpp: no source {name}.cpp (nor <source>_<aspect> with an aspect of "
                         f"{', '.join(ASPECTS)}), and not a declared suite across sources")
    for name in CROSS_CUTTING:
        if name not in names:
            found.append(f"{name}: declared a suite across sources in tests/layering/mirror_test.py, but there is "
                         f"no tests/{name}_test.cpp")
    return found


def main():
    return report(problems(source_root()), "mirror: every test file mirrors its source",
                  "mirror: {n} test file(s) against the rule")


if __name__ == "__main__":
    sys.exit(main())
