#!/usr/bin/env python3
"""No function in the given files is longer than LIMIT lines (issue 32: the
command-line room's functions stay readable). A function is a block that
opens at namespace level on a line that is not a namespace, class, struct or
enum; its length counts from that line to its closing brace.

usage: function_length.py LIMIT FILE...
"""
import re
import sys


def long_functions(path, limit):
    depth, start, name = 0, None, ""
    for i, line in enumerate(open(path, encoding="utf-8")):
        code = re.sub(r"//.*", "", line)
        code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
        code = re.sub(r"'(\\.|[^'\\])'", "''", code)
        if re.match(r"\s*namespace\b", code) or re.match(r"\s*}\s*//\s*namespace", line):
            continue
        if depth == 0 and start is None and code.rstrip().endswith("{") and \
                not re.match(r"\s*(struct|class|enum|extern|union)\b", code):
            start, name = i, line.strip()[:80]
        depth += code.count("{") - code.count("}")
        if start is not None and depth == 0:
            if i - start + 1 > limit:
                yield f"{path}:{start + 1}: {i - start + 1} lines, above {limit}: {name}"
            start = None


def main():
    limit = int(sys.argv[1])
    bad = [m for p in sys.argv[2:] for m in long_functions(p, limit)]
    for m in bad:
        print(m)
    print(f"functions: {len(sys.argv) - 2} files checked, {len(bad)} function(s) above {limit} lines")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
