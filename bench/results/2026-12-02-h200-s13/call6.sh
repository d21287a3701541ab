# Call 6: KernelLoad.MoreSharedMemory... reading the fatbin where the kernel
# directory has no PTX; the whole strict suite on the fatbins and the PTX.
set -u
D=build-bench/devrun5
for k in fatbin ptx; do
  QOPT_TEST_KERNEL_DIR=$D/kn/$k timeout 150 $D/bin/qopt-gpu-tests > $OUT/strict_$k.log 2>&1
  echo "strict on $k rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/strict_$k.log | tr '\n' ' ')"
done
grep -E "KernelLoad" $OUT/strict_fatbin.log | cut -c1-120
