"""What the checks of tests/layering share: the libraries in their order, the one walk over the
source tree, and how a check reports (its problems one a line, exit status 1 when there are any).

The checks run as scripts (python3 tests/layering/<check>_test.py SOURCE_DIR), so their own
folder is first on sys.path and `import tree` finds this module.
"""
import pathlib
import sys

# The libraries (layers), lowest first: a file may include its own and the ones below it.
LIBRARIES = ["engine", "ebpf", "ipam", "drivers", "cni-entry"]


def source_root():
    """The repository checked: the first argument (SOURCE_DIR), or the working directory."""
    return pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()


def walk(base, endings, skip=()):
    """The files under `base` (recursively, sorted) whose name ends with one of `endings`
    (".cpp", "_test.cpp"), leaving out those with a folder named in `skip` below `base`."""
    if not base.is_dir():
        return []
    return [f for f in sorted(base.rglob("*"))
            if f.is_file() and f.name.endswith(tuple(endings)) and not set(f.relative_to(base).parts[:-1]) & set(skip)]


def report(problems, passed, failed=""):
    """Prints every problem, then `failed` (its "{n}": how many) or `passed` when there is none;
    returns the exit status for main()."""
    for p in problems:
        print(p)
    summary = failed.format(n=len(problems)) if problems else passed
    if summary:
        print(summary)
    return 1 if problems else 0
