#!/usr/bin/env bash
# Issue 29 in one command on a GPU machine: the small GPT of python/examples/train_gpt.py under
# FSDP2 (python/examples/train_gpt_fsdp.py) with qopt.FlashAdamW, qopt.AdamW8bit and
# torch.optim.AdamW(fused=True), DCP checkpoints resumed at the same and at other world sizes,
# python/tests/dist_check.py, and a report (README.md, loss_curves.csv/.png, per-run CSVs, logs).
#
#   bash scripts/multi_gpu_29.sh OUTDIR        # from the repository root
#
# The plan follows the GPUs that nvidia-smi lists (N):
#   N >= 2: per optimizer, W = 2 GPUs for STEPS steps with a checkpoint after SAVE_AT (tag w2);
#           resumed from it on 2 GPUs (w2_from2: must be bit-exact) and on M GPUs (w<M>_from2,
#           M = 4 where N >= 4, else 1); the reverse: M GPUs with a checkpoint (w<M>) resumed on
#           2 (w2_from<M>); then `torchrun --nproc_per_node=2 python/tests/dist_check.py`.
#   N == 1: per optimizer, 1 GPU with a checkpoint (w1) resumed on 1 (w1_from1: bit-exact).
# The three optimizers' runs go at the same time on the same GPUs (SERIAL=1: one after another,
# for tokens/s of a GPU alone). Environment: STEPS (200), SAVE_AT (100), OPTS (all three),
# TRAIN_ARGS (more train_gpt_fsdp.py flags), PYTEST=1 also runs python/tests/test_train_fsdp.py
# on CPU processes (gloo) beside the GPU runs, QOPT_BUILD_DIR (the kernels and libqopt_runtime.so;
# default build). NVLink multicast stays off (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1). Exit status: 0 when every run finished and every verdict in
# the report holds, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
R=${1:?usage: multi_gpu_29.sh OUTDIR}
mkdir -p "$R/runs" "$R/logs"
R=$(cd "$R" && pwd)
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export QOPT_BUILD_DIR=${QOPT_BUILD_DIR:-$PWD/build}
STEPS=${STEPS:-200} SAVE_AT=${SAVE_AT:-100} OPTS=${OPTS:-flash_adamw adamw8bit torch_fused}
TRAIN_ARGS=${TRAIN_ARGS:-}
PY=${PYTHON:-python3}
TORCHRUN="$PY -m torch.distributed.run"
WORK=$(mktemp -d)                 # checkpoints and weights (not part of the report)
N=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
start=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - start ))s] $*" | tee -a "$R/logs/timeline.txt"; }

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "gpus: $N"; nvidia-smi -L 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
  echo "cpus: $(nproc)"
  $PY -c 'import sys, torch; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")'
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST"
  echo "steps $STEPS, checkpoint after $SAVE_AT, train args: ${TRAIN_ARGS:-(defaults)}"
} > "$R/env.txt" 2>&1
cat "$R/env.txt"
if [ "$N" -lt 1 ]; then echo "no GPU listed by nvidia-smi" >&2; exit 1; fi

if [ "$N" -ge 2 ]; then W=2; M=$([ "$N" -ge 4 ] && echo 4 || echo 1); else W=1; M=; fi

# run WORLD TAG OPT ARGS...: one torchrun on GPUs 0..WORLD-1; CSV and log under $R, the final
# weights under $WORK/OPT; the command line is kept in $R/commands.txt
run() {
  local world=$1 tag=$2 opt=$3; shift 3
  mkdir -p "$R/runs/$opt" "$WORK/$opt"
  # (TORCHRUN and TRAIN_ARGS are word lists: split on purpose)
  # shellcheck disable=SC2206
  local cmd=($TORCHRUN --standalone --nproc_per_node="$world" python/examples/train_gpt_fsdp.py
             --opt "$opt" --steps "$STEPS" $TRAIN_ARGS "$@"
             --csv "$R/runs/$opt/$tag.csv" --save-weights "$WORK/$opt/$tag.pt")
  echo "CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((world - 1))) ${cmd[*]}" | sed "s#$WORK#\$WORK#g; s#$R#\$OUT#g; s#$PY -m torch.distributed.run#torchrun#" >> "$R/commands.txt"
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((world - 1))) timeout 500 "${cmd[@]}" > "$R/logs/$opt.$tag.log" 2>&1
  local rc=$?
  stamp "$opt $tag exit $rc"
  return $rc
}

pipeline() {   # every run of one optimizer, in order
  local o=$1 ck=$WORK/$1
  run $W w$W $o --save-at "$SAVE_AT" --ckpt "$ck/ck$W" || return 1
  run $W w${W}_from$W $o --resume "$ck/ck$W"
  [ -z "$M" ] && return 0
  run $M w${M}_from$W $o --resume "$ck/ck$W"
  run $M w$M $o --save-at "$SAVE_AT" --ckpt "$ck/ck$M" || return 1
  run $W w${W}_from$M $o --resume "$ck/ck$M"
}

if [ "${PYTEST:-0}" = 1 ]; then
  stamp "pytest test_train_fsdp.py (CPU processes, gloo) started"
  ( timeout 400 $PY -m pytest -q -p no:cacheprovider -rA python/tests/test_train_fsdp.py \
      > "$R/logs/pytest_train_fsdp.log" 2>&1; echo "exit $?" >> "$R/logs/pytest_train_fsdp.log"
    stamp "pytest: $(grep -E 'passed|failed|error' "$R/logs/pytest_train_fsdp.log" | tail -1)" ) &
  PYTEST_PID=$!
fi

stamp "runs at W=$W${M:+, M=$M} GPUs: $OPTS"
pids=()
for o in $OPTS; do
  if [ "${SERIAL:-0}" = 1 ]; then pipeline $o; else pipeline $o & pids+=($!); fi
done
for p in "${pids[@]}"; do wait $p; done

if [ "$N" -ge 2 ]; then
  stamp "dist_check.py on 2 GPUs"
  echo "torchrun --standalone --nproc_per_node=2 python/tests/dist_check.py" >> "$R/commands.txt"
  timeout 300 $TORCHRUN --standalone --nproc_per_node=2 python/tests/dist_check.py > "$R/logs/dist_check.log" 2>&1
  echo "exit $?" >> "$R/logs/dist_check.log"
  stamp "dist_check: $(grep RESULT "$R/logs/dist_check.log" | tail -1)"
fi
[ -n "${PYTEST_PID:-}" ] && wait "$PYTEST_PID"

stamp "report"
$PY scripts/multi_gpu_29_report.py --runs "$R/runs" --weights "$WORK" --out "$R" --world $W ${M:+--other $M} \
  --steps "$STEPS" --save-at "$SAVE_AT"
status=$?
rm -rf "$WORK"
stamp "done, report exit $status"
exit $status
