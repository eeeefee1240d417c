#!/usr/bin/env python3
"""The plugin pages (docs/plugins/<type>.md) against the keys each driver's parse reads.

Each driver is one file, drivers/<type>.cpp (host-device: host_device.cpp). Its parse reads keys
through json::get_*() and small helpers that all take the object first and the key's name, a
string literal, second (get_u32(obj, "txQLen", where, ...), on_off(conf, "spoofchk", where)).
This test extracts those literals and checks, for every driver:
  - it has a page, docs/plugins/<type>.md, and every page names a driver;
  - every key its file reads appears on its page in a code span (`key`, or inside one such as
    `runtimeConfig.deviceID`): a key added to a driver fails here until it is documented;
  - every key in the first column of the page's tables is a literal of the driver's file, a key
    the orchestrator parses for every driver (ipam, dns, args, runtimeConfig), or a key of a
    shared parse helper (drivers/driver.hpp, lower.hpp, vf_attach.hpp) that the driver's file
    calls: a documented key that the driver does not read fails here.
Usage: plugin_keys_test.py <source dir>. Exit 0 when all hold, 1 with every mismatch listed.
"""
import pathlib
import re
import sys

# Files of drivers/ that are not drivers: shared steps and the orchestration around drivers.
HELPERS = {"common", "delegate", "lower", "registry", "steps", "undo", "undo_run", "vf_attach"}
# Keys parsed for every driver (drivers/common.cpp: parse_ipam, parse_dns, the capabilities).
EVERY_DRIVER = {"type", "ipam", "dns", "args", "cni", "runtimeConfig"}
# Keys read by a shared helper, and the calls that read them (the helper's doc comment names them).
SHARED = {
    "mtu": ["parse_mtu(", "lower::parse_keys("],
    "master": ["lower::parse_keys("],
    "linkInContainer": ["lower::parse_keys("],
    "mac": ["requested_mac("],
    "deviceID": ["vf_attach::device_id("],
    "link_state": ["vf_attach::parse_link_state("],
    "ipMasqBackend": ["check_ipmasq_backend("],
}
KEY = r"[A-Za-z][A-Za-z0-9_.-]*"
# A call whose second argument is a key literal, or a (key, value) pair literal in a loop.
CALL = re.compile(r"\w+\(\s*[\w*&.>\[\]()-]+?\s*,\s*\"(" + KEY + r")\"\s*[,)]|std::pair\{\s*\"(" + KEY + r")\"")
# A loop over key literals: for (const char* key : {"ingressRate", "ingressBurst", ...}).
LOOP = re.compile(r"for\s*\(\s*(?:const\s+)?(?:char\s*\*|auto|std::string_view)\s*&?\s*\w+\s*:\s*\{([^}]*)\}")


def code(path):
    return re.sub(r"//[^\n]*", "", path.read_text())


def keys_read(path):
    text = code(path)
    keys = {a or b for a, b in CALL.findall(text)}
    for m in LOOP.finditer(text):
        keys |= set(re.findall(r"\"(" + KEY + r")\"", m.group(1)))
    return keys


def literals(path):
    return set(re.findall(r"\"(" + KEY + r")\"", code(path)))


def code_spans(text):
    return re.findall(r"`([^`]+)`", text)


def table_keys(text):
    """First-column keys of the page's tables: `key` cells, header and separator rows excluded."""
    keys = set()
    for line in text.splitlines():
        m = re.match(r"\|\s*`(" + KEY + r")`", line)
        if m:
            keys.add(m.group(1))
    return keys


def main():
    root = pathlib.Path(sys.argv[1])
    drivers = {p.stem.replace("_", "-"): p for p in (root / "drivers").glob("*.cpp") if p.stem not in HELPERS}
    pages = {p.stem: p for p in (root / "docs" / "plugins").glob("*.md") if p.stem != "README"}
    errors = []
    for t in sorted(set(pages) - set(drivers)):
        errors.append(f"docs/plugins/{t}.md: no driver drivers/{t.replace('-', '_')}.cpp")
    for t, src in sorted(drivers.items()):
        page = pages.get(t)
        if page is None:
            errors.append(f"{src.relative_to(root)}: no page docs/plugins/{t}.md")
            continue
        text = page.read_text()
        spans = code_spans(text)
        for k in sorted(keys_read(src)):
            if not any(re.search(r"(^|[^A-Za-z0-9_])" + re.escape(k) + r"($|[^A-Za-z0-9_])", s) for s in spans):
                errors.append(f"docs/plugins/{t}.md: `{k}` (read by {src.relative_to(root)}) is not documented")
        calls = code(src)
        known = literals(src) | EVERY_DRIVER | {k for k, fns in SHARED.items() if any(f in calls for f in fns)}
        # A nested key (`args.cni.mac`, `runtimeConfig.deviceID`) is read one level at a time.
        unread = [k for k in table_keys(text) if k not in known and not set(k.split(".")) <= known]
        for k in sorted(unread):
            errors.append(f"docs/plugins/{t}.md: `{k}` is in a table but neither {src.relative_to(root)} "
                          f"nor a shared parse helper it calls reads it")
    for e in errors:
        print(e)
    print(f"{len(drivers)} drivers, {len(pages)} pages, {len(errors)} mismatches")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
