#!/usr/bin/env bash
# ci/gpu-check's verdicts, with a fake nvidia-smi and a fake collcheck (no GPU
# needed): GPUs listed but CUDA dead is a failure, not a skip; a mix of passes
# and skips or known findings is not a pass; fp8 on an sm_80 GPU is skipped
# with the reason; every pass is 0 and any failure 1.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fakes=$root/tests/gpu_check
status=0
check() {  # name expected-exit gpus cc mode [grep-pattern]
  local name=$1 want=$2 gpus=$3 cc=$4 mode=$5 pattern=${6:-}
  local dir; dir=$(mktemp -d)
  local path=$PATH
  [ "$gpus" -gt 0 ] && path=$fakes:$PATH
  out=$(PATH=$path FAKE_GPUS=$gpus FAKE_CC=$cc FAKE_MODE=$mode COLLCHECK_BIN=$fakes/fake-collcheck CASES=1 \
        LOG_DIR=$dir "$root/ci/gpu-check" 2>&1)
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL $name: exit $got, expected $want"; echo "$out" | tail -20; status=1; return
  fi
  if [ -n "$pattern" ] && ! grep -qE "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | tail -20; status=1; return
  fi
  echo "ok   $name (exit $got)"
  rm -rf "$dir"
}
check "GPUs listed but CUDA cannot start" 1 1 9.0 nocuda "nvidia-smi lists 1 GPU"
check "no GPU at all" 77 0 9.0 nocuda "SKIPPED"
check "every cell passes" 0 1 9.0 pass "72 passed, 0 failed, 0 skipped"
check "one rank per GPU, p printed with the one-rank note" 0 1 9.0 pass "p = 1, where NCCL runs only its one-rank path"
check "one failing cell" 1 1 9.0 onefail "float32/prod"
check "fp8 on sm_80 is skipped, and a partial pass is not 0" 77 1 8.0 pass "fp8 needs sm_90 or newer; this GPU is sm_80"
check "known findings are named, and not a pass" 77 1 9.0 finding "4 known findings"
exit $status
