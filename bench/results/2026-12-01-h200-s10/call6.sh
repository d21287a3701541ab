set -u
S=$OUT/c6; mkdir -p $S
start=$(date +%s)
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "[+$(( $(date +%s)-start ))s] $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -3 | tr '\n' ' ')"; }
QOPT_TEST_KERNEL_DIR=devrun/kernels-carry/ptx run strict_carry timeout 150 devrun/bin/qopt-gpu-tests
for r in 1 2 3; do for s in head carry; do
  timeout 90 devrun/bin/qopt-bench --kernels devrun/kernels-$s --specs flash_adamw,flash_adam,flash_adamw_bf16,flash_adamw_ecc16,flash_adamw_linear --sizes 16,64,256 --no-sweep --no-runtime --json $S/b_${s}_$r.json > $S/b_${s}_$r.log 2>&1
  echo "[+$(( $(date +%s)-start ))s] bench $s $r rc=$?"; sed -n '/GB\/s (fraction of roof)/,$p' $S/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-130 | sed -n 2,6p
done; done
for s in head carry; do timeout 60 devrun/bin/qopt-main --kernels devrun/kernels-$s > $S/main_$s.log 2>&1; echo "main $s rc=$?"; grep -E "^flash_adamw" $S/main_$s.log; done
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $S
