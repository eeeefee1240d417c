#!/usr/bin/env python3
"""Write-ahead by construction: a driver changes the kernel only through drivers/steps.hpp.

Every drivers/*.cpp but the executor (steps.cpp) and the journal's own files (undo.cpp,
undo_run.cpp) must not call undo::will / undo::will_later, nor an engine function that changes the
node (MUTATING below; the VF drivers' PF and RDMA backends' set/move included), outside its
`namespace undo { ... }` blocks (the undo operations' executors, which run inverses). Every driver
is on the executor: none is exempt, and a new driver file is checked from its first line.
Usage: write_ahead_test.py SOURCE_DIR
"""
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from tree import report, source_root, walk  # noqa: E402

EXEMPT = {"steps.cpp", "undo.cpp", "undo_run.cpp"}

WILL = re.compile(r"\bundo::will(_later)?\s*\(")
MUTATING = re.compile(
    r"\b(link::(create_\w+|modify|set_\w+)|addr::add|route::add|rule::add|sysctl::write|tc::(add_\w+|attach|set_\w+)"
    r"|tun::create_\w+|nft::(add_\w+|firewall_add|firewall_isolate_bridge)|conntrack::remove_matching"
    r"|bridge_port::(add_vlan|del_vlan|set_\w+)|netconf::ensure_forwarding|vf::apply\w*|pci::rebind"
    r"|announce::enable_notify|(pf|rdma)->(set|move))\s*\("
)
UNDO_BLOCK = re.compile(r"^namespace (plumb::drivers::)?undo \{$.*?^\}  // namespace (plumb::drivers::)?undo$", re.M | re.S)


def direct_changes(text: str) -> list[str]:
    """The direct calls of a driver file, outside its undo operations' executors."""
    text = UNDO_BLOCK.sub("", text)
    return sorted({m.group(0).rstrip("( ") for m in WILL.finditer(text)} |
                  {m.group(0).rstrip("( ") for m in MUTATING.finditer(text)})


def main() -> int:
    drivers = source_root() / "drivers"
    errors = []
    for path in walk(drivers, (".cpp",)):
        if path.name in EXEMPT:
            continue
        calls = direct_changes(path.read_text())
        if calls:
            errors.append(f"drivers/{path.name} changes the node without a step (drivers/steps.hpp): {', '.join(calls)}")
    return report(errors, "")


if __name__ == "__main__":
    sys.exit(main())
