#!/usr/bin/env python3
"""Reports every function in the C++ sources longer than the limit (120 lines).

    scripts/check_function_length.py [--limit N] PATH...

PATH is a folder (its **/*.cpp and **/*.hpp are read) or a file (read whatever its name).
Each long function is reported as `path:line: NAME is N lines (limit 120)`, and the exit
status is 1 if there is any, 0 otherwise. A function counts from the first line of its
signature to its closing brace.

A function may stay long when the comment on the line just before its signature (or before
its `template <...>` line) says why:

    // long-function: one table of the format's fields, clearer in one piece
    void read_fields(...) {

The sources are clang-formatted, which this relies on instead of parsing C++:
  * a function at namespace scope starts at column 0, its body opens with `{` at the end of
    its signature's last line and closes with a `}` at column 0;
  * a member function defined inside a class body (a class or struct at column 0) is indented
    by two spaces, opens the same way and closes with a `}` indented by two spaces.
Member functions of classes nested in other classes or in functions are not checked, nor
are functions written on one line (short by definition). A `}` at column 0 inside a raw
string literal would end a function early.
"""
import argparse
import os
import re
import sys

LIMIT = 120
EXEMPT = re.compile(r"//.*long-function:\s*\S")
# The name before the parameter list: qualified names, destructors and operators.
NAME = re.compile(r"((?:[A-Za-z_]\w*(?:<[^()]*>)?::)*(?:operator\s*\(\)|operator\s*[^\s(]+|~?[A-Za-z_]\w*))\s*\(")
NOT_FUNCTION = re.compile(r"^\s*(namespace|class|struct|union|enum|extern|if|else|for|while|do|"
                          r"switch|try|catch|return|case|default|public|private|protected)\b")
CLOSE = re.compile(r"^\}\s*(//.*)?$")
CLASS_OPEN = re.compile(r"^(template\s*<.*>\s*)?(class|struct)\s+\w[^;]*\{\s*$")
CLASS_CLOSE = re.compile(r"^\};\s*(//.*)?$")


def code(line):
    """The line without a trailing // comment (good enough for where a line ends)."""
    in_str = False
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and in_str:
            i += 2
            continue
        if c == '"':
            in_str = not in_str
        elif not in_str and line.startswith("//", i):
            return line[:i].rstrip()
        i += 1
    return line.rstrip()


def indent(line):
    return len(line) - len(line.lstrip(" "))


def signature_name(sig):
    """The function's name, or None where the block is not a function body."""
    if NOT_FUNCTION.match(sig) or "(" not in sig:
        return None
    # An initializer (`... table = {`, a lambda `= [] {`) opens data or a lambda, not a body.
    depth = 0
    for c in sig:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "=" and depth == 0:
            return None
    m = NAME.search(sig)
    return re.sub(r"\s+", "", m.group(1)) if m else None


def exempt(lines, start):
    """Whether the comment above the function (or above its template line) says why."""
    before = start - 1
    if before >= 0 and lines[before].lstrip().startswith("template"):
        before -= 1
    return before >= 0 and bool(EXEMPT.search(lines[before]))


def functions(lines):
    """Yields (first line index, last line index, name) of each function found."""
    in_class = False
    i = 0
    while i < len(lines):
        raw = lines[i]
        line = code(raw)
        if not in_class and CLASS_OPEN.match(line):
            in_class = True
            i += 1
            continue
        if in_class and CLASS_CLOSE.match(line):
            in_class = False
            i += 1
            continue
        level = 2 if in_class else 0
        if line.endswith("{") and indent(line) >= level and line.strip() != "{":
            # The signature starts at the nearest line above at the function's own indent.
            start = i
            while start > 0 and indent(lines[start]) > level and lines[start].strip():
                start -= 1
            first = lines[start]
            if first.strip() and indent(first) == level and not first.lstrip().startswith(("//", "#")):
                sig = " ".join(code(l).strip() for l in lines[start : i + 1])
                name = signature_name(sig)
                if name:
                    close = re.compile(r"^" + " " * level + r"\}\s*(//.*)?$")
                    end = i + 1
                    while end < len(lines) and not close.match(lines[end]):
                        end += 1
                    if end < len(lines):
                        yield start, end, name
                        i = end + 1
                        continue
        i += 1


def source_files(path):
    if os.path.isfile(path):
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            if f.endswith((".cpp", ".hpp")):
                yield os.path.join(root, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=LIMIT)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    long_ones = checked = 0
    for path in args.paths:
        for f in source_files(path):
            with open(f, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().split("\n")
            for start, end, name in functions(lines):
                checked += 1
                n = end - start + 1
                if n > args.limit and not exempt(lines, start):
                    print(f"{f}:{start + 1}: {name} is {n} lines (limit {args.limit})")
                    long_ones += 1
    if long_ones:
        print(f"function_length: {long_ones} function(s) over {args.limit} lines; split them, or "
              f"say why on the line above with a '// long-function: REASON' comment",
              file=sys.stderr)
        return 1
    print(f"function_length: {checked} functions, none over {args.limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
