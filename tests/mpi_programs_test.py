#!/usr/bin/env python3
"""The corpus of real MPI programs (examples/mpi/) run by `collcheck run`
under mpirun, as a user runs them: each program's header says what collcheck
must find (`collcheck-expect: KIND ranks=EXPR [fields=F,..] [group=WORD]`, or
`clean`); EXPR is Python over n, the number of ranks.

For each program, each mode (guarded, unguarded) and each size:
- a bug program: exit code 1, the first diagnosis of the expected kind and
  ranks, the fields it differs in, its communicator, and (C programs) a call
  site in the program's own source file;
- a correct program: exit code 0 and outcome clean;
- with --emit: the emitted scenario replays (collcheck replay) to exit 0,
  that is to its expected diagnosis (a correct program's: to none).

usage: mpi_programs_test.py COLLCHECK EXAMPLES_DIR [--np 2,4] [--modes guarded,unguarded] [--only NAME] [--emit]
Prints one line per run and a table; exit 1 if any run is wrong.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def expectation(path):
    with open(path) as f:
        text = f.read()
    m = re.search(r"collcheck-expect:\s*(.*)", text)
    if not m:
        raise SystemExit(f"{path}: no collcheck-expect line")
    line = m.group(1).replace("*/", "").strip()
    kind, _, rest = line.partition(" ")
    exp = {"kind": kind}
    # key=value pairs; a value (a Python expression) may hold spaces.
    for k, v in re.findall(r"(\w+)=(.*?)(?=\s+\w+=|$)", rest):
        exp[k] = v.strip()
    return exp


def expand(ranks_text):
    out = []
    for part in ranks_text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-")
            out += list(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def first_diagnosis(output):
    for line in output.splitlines():
        m = re.match(r"^\s+(\w+) \[ranks? ([^\]]+)\](.*)$", line)
        if m:
            return m.group(1), expand(m.group(2)), line
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("collcheck")
    ap.add_argument("examples")
    ap.add_argument("--np", default="2,4")
    ap.add_argument("--modes", default="guarded,unguarded")
    ap.add_argument("--only", default="")
    ap.add_argument("--emit", action="store_true")
    ap.add_argument("--deadline", default="3")
    a = ap.parse_args()
    collcheck = os.path.abspath(a.collcheck)
    if not shutil.which("mpicc") or not shutil.which("mpirun"):
        print("SKIP: mpicc or mpirun is not installed (openmpi-bin, libopenmpi-dev)")
        return 0
    # The programs' own path holds a space, a quote, a backslash and a letter
    # outside ASCII: the dumps name it as each call's object (a JSON string).
    work = tempfile.mkdtemp(prefix="collcheck-mpi-programs-\u00e9 \"q\\ ")
    programs = sorted(f for f in os.listdir(a.examples) if f.endswith((".c", ".py")))
    if a.only:
        programs = [p for p in programs if a.only in p]
    # Debian's python3-mpi4py is for the system's python3, whatever python runs this script.
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    has_mpi4py = subprocess.run([python, "-c", "import mpi4py"], capture_output=True).returncode == 0
    launcher = ["mpirun", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    failures, rows = [], []
    for prog in programs:
        src = os.path.join(a.examples, prog)
        exp = expectation(src)
        if prog.endswith(".c"):
            exe = os.path.join(work, prog[:-2])
            subprocess.run(["mpicc", "-g", "-O0", "-o", exe, src], check=True)
            cmd = [exe]
        else:
            if not has_mpi4py:
                print(f"SKIP {prog}: python3-mpi4py is not installed")
                continue
            cmd = [python, src]
        for n in [int(x) for x in a.np.split(",")]:
            for mode in a.modes.split(","):
                d = os.path.join(work, f"{prog}-{n}-{mode}")
                scen = d + ".yaml"
                args = [collcheck, "run", "--mode", mode, "--deadline", a.deadline, "--dir", d]
                if a.emit and not exp.get("noreplay"):
                    args += ["--emit-scenario", scen]
                t0 = time.time()
                try:
                    p = subprocess.run(args + ["--"] + launcher + ["-np", str(n)] + cmd, capture_output=True,
                                       text=True, timeout=180)
                    out, code = p.stdout + p.stderr, p.returncode
                except subprocess.TimeoutExpired:
                    out, code = "collcheck run did not end in 180 s", -1
                secs = time.time() - t0
                why = []
                got = first_diagnosis(out)
                if exp["kind"] == "clean":
                    if code != 0 or "outcome: clean" not in out:
                        why.append(f"expected clean with exit 0, got exit {code}")
                    elif a.emit and os.path.exists(scen):
                        r = subprocess.run([collcheck, "replay", scen], capture_output=True, text=True, timeout=180)
                        if r.returncode != 0 or "expected: none -> holds" not in r.stdout:
                            why.append(f"the emitted scenario's replay of a correct program exited {r.returncode}: "
                                       + (r.stdout + r.stderr).strip().splitlines()[-1][:200])
                    elif a.emit:
                        why.append("no scenario emitted")
                else:
                    want = eval(exp["ranks"], {"n": n})
                    if code != 1:
                        why.append(f"exit {code}, expected 1")
                    if not got:
                        why.append("no diagnosis")
                    else:
                        kind, ranks, line = got
                        if kind != exp["kind"]:
                            why.append(f"kind {kind}, expected {exp['kind']}")
                        # Two ranks and a mismatch: no majority; either side may be named.
                        if ranks != sorted(want) and not (n == 2 and kind.endswith("mismatch")):
                            why.append(f"ranks {ranks}, expected {sorted(want)}")
                        for f in exp.get("fields", "").split(","):
                            if f and f not in line.split("differs in:")[-1]:
                                why.append(f"field {f} not named in: {line.strip()}")
                        if exp.get("group") and exp["group"] not in line:
                            why.append(f"communicator '{exp['group']}' not named")
                        if prog.endswith(".c") and f"{prog}:" not in out:
                            why.append(f"no call site in {prog}")
                    if a.emit and exp.get("noreplay"):
                        print(f"      replay not checked: {exp['noreplay']}")
                    elif a.emit and not why and os.path.exists(scen):
                        r = subprocess.run([collcheck, "replay", scen], capture_output=True, text=True, timeout=180)
                        if r.returncode != 0:
                            why.append(f"the emitted scenario's replay exited {r.returncode}: "
                                       + (r.stdout + r.stderr).strip().splitlines()[-1][:200])
                    elif a.emit and not why:
                        why.append("no scenario emitted")
                status = "ok" if not why else "WRONG"
                summary = (got[2].strip()[:150] if got else out.strip().splitlines()[-1][:150] if out.strip() else "")
                print(f"{status:5} {prog:32} np={n} {mode:9} exit={code} {secs:5.1f}s  {summary}", flush=True)
                if why:
                    failures.append(f"{prog} np={n} {mode}: " + "; ".join(why))
                    print("      " + "; ".join(why))
                    print("      " + out.replace("\n", "\n      ")[-3000:])
                rows.append((prog, n, mode, status))
    print(f"\n{len(rows) - len(failures)} of {len(rows)} runs right ({len(programs)} programs)")
    for f in failures:
        print("WRONG: " + f)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
