# Call 5: the final commit's GPU test binary (the qmap flag's test as
# committed) on the final build's kernels, PTX and fatbins.
set -u
D=build-bench/devrun5
for k in ptx fatbin; do
  QOPT_TEST_KERNEL_DIR=$D/kn/$k timeout 150 $D/bin/qopt-gpu-tests > $OUT/strict_$k.log 2>&1
  echo "strict on $k rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/strict_$k.log | tr '\n' ' ')"
done
grep -E "^\[       OK|^\[  FAILED" $OUT/strict_ptx.log | cut -c1-120
