#!/usr/bin/env python3
"""The function-size rule (no function over ~80 lines) in the tests, as clang-tidy's
readability-function-size holds it in the production code (.clang-tidy, scripts/tidy).

Counts the lines between a function's braces (a doctest case is a function) in every .cpp and
.hpp under tests/, string literals and comments blanked first so the braces in JSON texts do not
count. A longer function is split into helper functions (the case then reads as its steps) or
listed in EXCEPTIONS with the reason; an exception that names no such function fails too.
Usage: function_size_test.py SOURCE_DIR
"""
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from tree import report, source_root, walk  # noqa: E402

LIMIT = 80

# (file under tests/, the start of the function's first line) -> why it stays longer.
EXCEPTIONS = {
}

# Raw strings, strings, character literals and comments: blanked (newlines kept) before counting.
LITERAL = re.compile(r'R"([^(\s]*)\((?:.|\n)*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*(?:.|\n)*?\*/')
# What stands before a function body's '{': a parameter list's ')' and qualifiers.
FUNCTION_HEAD = re.compile(r"\)\s*(const|override|noexcept|final|mutable|->\s*[\w:<>,\s*&]+|\s)*$")
NOT_FUNCTION = re.compile(r"^\s*(\}\s*)?(if|for|while|switch|catch|else)\b|\[[^\]]*\]\s*\(|\bdo\s*$")


def long_functions(text):
    """(first line, body lines) of every function of `text` whose body is longer than LIMIT."""
    code = LITERAL.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text).split("\n")
    opened, found = [], []
    for n, line in enumerate(code):
        for col, ch in enumerate(line):
            if ch == "{":
                opened.append((n, col))
            elif ch == "}" and opened:
                start, start_col = opened.pop()
                head = code[start][:start_col]
                if start > 0 and not head.strip():
                    head = code[start - 1]  # the brace on a line of its own
                if FUNCTION_HEAD.search(head) and not NOT_FUNCTION.search(head) and n - start - 1 > LIMIT:
                    first = start if code[start][:start_col].strip() else start - 1
                    found.append((first, n - start - 1))
    return found


def main():
    tests = source_root() / "tests"
    problems, used = [], set()
    for f in walk(tests, (".cpp", ".hpp")):
        rel = f.relative_to(tests).as_posix()
        text = f.read_text(errors="replace")
        lines = text.split("\n")
        for first, size in long_functions(text):
            # A case whose title runs over several lines starts at its TEST_CASE( line.
            while first > 0 and lines[first].lstrip().startswith('"'):
                first -= 1
            key = next((k for k in EXCEPTIONS if k[0] == rel and lines[first].strip().startswith(k[1])), None)
            if key:
                used.add(key)
                continue
            problems.append(f"tests/{rel}:{first + 1}: a function of {size} lines (the rule: {LIMIT}): "
                            f"split it into helper functions, or list it in tests/layering/function_size_test.py "
                            f"with the reason")
    for key in EXCEPTIONS:
        if key not in used:
            problems.append(f"tests/{key[0]}: the exception for {key[1]}... names no function over {LIMIT} lines: "
                            f"remove it from tests/layering/function_size_test.py")
    return report(problems, f"function size: no test function over {LIMIT} lines but the {len(EXCEPTIONS)} declared "
                            f"exceptions", "function size: {n} problem(s)")


if __name__ == "__main__":
    sys.exit(main())
