#!/usr/bin/env python3
"""The one layering rule, checked on every #include of the production code.

Libraries, lowest first: engine, ebpf, ipam, drivers, cni-entry. A file may include its own
library and the ones below it (the build's include views enforce the same between libraries).
Inside a library, its sub-folders are ordered too (below): a file in one may include its own
sub-folder and the ones declared below it, never one above or beside it. Files at a library's
top (cni-entry/main.cpp) may include all of it. Usage: layering_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from tree import LIBRARIES, report, source_root, walk  # noqa: E402

# Sub-folder -> the sub-folders of the same library it may include (besides itself).
SUBFOLDERS = {
    "engine": {
        "base": [],
        "netlink": ["base"],
        "kernel": ["base", "netlink"],
        "nft": ["base", "netlink", "kernel"],
        "cni": ["base", "kernel"],
        "state": ["base"],
        "devinfo": ["base", "state"],
        "k8s": ["base"],
    },
    "cni-entry": {
        "npwg": [],
        "source": ["npwg"],
        "pod": ["npwg", "source"],
        "install": ["source"],
        "reconcile": ["source"],
        "daemon": ["npwg", "source", "pod", "reconcile"],
        "shim": ["daemon"],
        "cli": ["daemon", "install", "reconcile"],
    },
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def place(path):
    """(library, sub-folder or None) of a repository-relative path, or None outside the libraries."""
    parts = pathlib.PurePosixPath(path).parts
    if not parts or parts[0] not in LIBRARIES:
        return None
    sub = parts[1] if len(parts) > 2 and parts[0] in SUBFOLDERS else None
    return parts[0], sub


def violations(root):
    found = []
    for lib in LIBRARIES:
        for f in walk(root / lib, (".cpp", ".hpp", ".h", ".c"), skip=("gen",)):
            rel = f.relative_to(root).as_posix()
            src_lib, src_sub = place(rel)
            if src_sub is not None and src_sub not in SUBFOLDERS[src_lib]:
                found.append(f"{rel}: sub-folder {src_lib}/{src_sub} is not declared in tests/layering/layering_test.py")
                continue
            for target in INCLUDE.findall(f.read_text(errors="replace")):
                where = place(target)
                if where is None:
                    continue  # a system or generated header, or one of the build's
                dst_lib, dst_sub = where
                if LIBRARIES.index(dst_lib) > LIBRARIES.index(src_lib):
                    found.append(f"{rel}: includes {target}, of {dst_lib}, above {src_lib}")
                elif dst_lib == src_lib and src_sub is not None and dst_sub is not None and dst_sub != src_sub \
                        and dst_sub not in SUBFOLDERS[src_lib][src_sub]:
                    found.append(f"{rel}: includes {target}: {src_lib}/{src_sub} may include only "
                                 f"{', '.join(SUBFOLDERS[src_lib][src_sub]) or 'itself'} of {src_lib}")
    return found


def main():
    return report(violations(source_root()), "layering: every include follows the rule",
                  "layering: {n} include(s) against the rule")


if __name__ == "__main__":
    sys.exit(main())
