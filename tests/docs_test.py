#!/usr/bin/env python3
"""The docs test (issue 32): every `$ collcheck ...` command shown in README.md
and docs/*.md whose inputs are in the repository is run, and every line of the
output shown under it (times, seeds and counts vary from
run to run: they are compared as N) must appear in what the command prints now. Commands that need
files the page makes first, another program or a GPU are listed as not run,
with why; the test fails if fewer than MIN_RUN commands ran, so it cannot pass
by skipping everything.

usage: docs_test.py COLLCHECK_BIN SOURCE_DIR
"""
import glob
import os
import re
import shlex
import subprocess
import sys

MIN_RUN = 12
TIMEOUT_S = 300


def blocks(path):
    """Each shown command of a fenced block with the output lines under it."""
    inside = False
    cmd, out = None, []
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if line.lstrip().startswith("```"):
            if inside and cmd is not None:
                yield cmd, out
            inside, cmd, out = not inside, None, []
            continue
        if not inside:
            continue
        if line.startswith("$ "):
            if cmd is not None:
                yield cmd, out
            cmd, out = line[2:].strip(), []
        elif cmd is not None:
            out.append(line)


def normalize(text):
    """Numbers vary from run to run (times, seeds, rates), and so do the widths
    of the columns they sit in: every run of digits (with its decimal point)
    reads as N, every run of blanks as one."""
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return re.sub(r"[ \t]+", " ", text)


def why_not_run(cmd, source):
    words = shlex.split(cmd)
    if not words or words[0] not in ("collcheck", "./build/default/collcheck"):
        return f"not collcheck ({words[0] if words else 'empty'})"
    if "nccl" in words:
        return "needs a GPU (ci/gpu-check runs it)"
    for w in words[1:]:
        if w.startswith("-") or "/" not in w and not w.endswith((".yaml", ".json", ".so")):
            continue
        if w.startswith("/tmp/"):
            return f"reads {w}, which the page makes first"
        if not os.path.exists(os.path.join(source, w)):
            return f"reads {w}, which the page makes first"
    if "--json" in words or "--emit-scenario" in words or "--dump-dir" in words:
        return "writes a file (the page then reads it)"
    return None


def main():
    binary, source = sys.argv[1], sys.argv[2]
    pages = [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    ran, skipped, failures = 0, [], []
    for page in pages:
        rel = os.path.relpath(page, source)
        for cmd, shown in blocks(page):
            reason = why_not_run(cmd, source)
            if reason:
                skipped.append(f"{rel}: {cmd}: {reason}")
                continue
            args = shlex.split(cmd)[1:]
            try:
                p = subprocess.run([binary] + args, cwd=source, capture_output=True, text=True, timeout=TIMEOUT_S)
                got = p.stdout + p.stderr
            except subprocess.TimeoutExpired:
                failures.append(f"{rel}: {cmd}: did not end within {TIMEOUT_S} s")
                continue
            ran += 1
            norm = normalize(got)
            in_timeline = False
            for line in shown:
                want = line.strip()
                # A timeline's rows (which call ended first, which ranks are
                # alike) depend on the run's timing: the diagnosis and the
                # verdict around it are what the page promises.
                if want.startswith("timeline ("):
                    in_timeline = True
                    continue
                if in_timeline and not want.startswith("expected:"):
                    continue
                in_timeline = False
                if want.endswith("..."):  # cut short on the page
                    want = want[:-3]
                want = normalize(want).strip()
                if not want:
                    continue
                if want not in norm:
                    failures.append(f"{rel}: {cmd}:\n    the page shows: {line.strip()}\n    not in what it prints now:\n"
                                    + "".join(f"      | {l}\n" for l in got.splitlines()[:40]))
                    break
    for s in skipped:
        print(f"not run: {s}")
    print(f"docs: {ran} commands run, {len(skipped)} not run, {len(failures)} whose page no longer matches")
    for f in failures:
        print(f"MISMATCH {f}")
    if ran < MIN_RUN:
        print(f"docs: only {ran} commands ran (at least {MIN_RUN} must)")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
