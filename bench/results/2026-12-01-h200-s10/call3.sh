set -u
S=$OUT/c3; mkdir -p $S
start=$(date +%s)
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "[+$(( $(date +%s)-start ))s] $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -3 | tr '\n' ' ')"; }
QOPT_TEST_KERNEL_DIR=devrun/kernels-mbar/ptx run strict_mbar timeout 150 devrun/bin/qopt-gpu-tests
grep -E "FAILED|differ" $S/strict_mbar.log | head -10
for r in 1 2; do for s in head bulk mbar relaxed; do
  timeout 90 devrun/bin/qopt-bench --kernels devrun/kernels-$s --specs flash_adamw,flash_adam,flash_lion,flash_adamw_bf16 --sizes 64,256 --no-sweep --no-runtime --json $S/b_${s}_$r.json > $S/b_${s}_$r.log 2>&1
  echo "[+$(( $(date +%s)-start ))s] bench $s $r rc=$?"; sed -n '/GB\/s (fraction of roof)/,$p' $S/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-150 | head -5
done; done
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $S
echo "[+$(( $(date +%s)-start ))s] done"
