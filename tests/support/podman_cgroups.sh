#!/usr/bin/env bash
# The cgroups podman leaves on the machine. podman (cgroup_manager "cgroupfs", as the runtime tests
# run it in their private namespaces) creates libpod_parent/ and a cgroup per container and conmon
# under every cgroup hierarchy of the machine: cgroupfs has no namespace of its own. A container
# ended with its PID namespace leaves its cgroup behind. This fixture records the cgroups that exist
# before the runtime tests (setup) and removes, deepest first, the ones under libpod_parent that
# did not (cleanup): rmdir only succeeds on a cgroup with no process and no child, so nothing in
# use is touched. Usage: podman_cgroups.sh setup|cleanup STATE_FILE
set -euo pipefail
mode=$1 state=$2
list() { find /sys/fs/cgroup -maxdepth 1 -mindepth 1 -type d -exec find {}/libpod_parent -type d \; 2>/dev/null | sort; }
case $mode in
  setup) list >"$state" ;;
  cleanup)
    [ -f "$state" ] || { echo "no $state: the setup did not run"; exit 1; }
    # A container's processes may still be exiting (its PID namespace just ended): 10 tries, 0.5 s apart.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      list | sort -r | while read -r d; do
        grep -qxF "$d" "$state" || rmdir "$d" 2>/dev/null || true
      done
      left=$(list | grep -vxF -f "$state" || true)
      [ -z "$left" ] && break
      sleep 0.5
    done
    rm -f "$state"
    if [ -n "$left" ]; then echo "cgroups the runtime tests left: $left"; exit 1; fi ;;
  *) echo "usage: $0 setup|cleanup STATE_FILE" >&2; exit 2 ;;
esac
