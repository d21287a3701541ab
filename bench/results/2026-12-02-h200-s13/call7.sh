# Call 7: the runtime checks a kernel's static shared memory with the
# manifest's dynamic bytes at load (KernelLoad.StaticAndDynamic... new);
# the strict suite on the fatbins and the PTX, pytest on CUDA with the new
# runtime library.
set -u
D=build-bench/devrun6
for k in fatbin ptx; do
  QOPT_TEST_KERNEL_DIR=$D/kn/$k timeout 150 $D/bin/qopt-gpu-tests > $OUT/strict_$k.log 2>&1
  echo "strict on $k rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/strict_$k.log | tr '\n' ' ')"
done
grep -E "KernelLoad|needs" $OUT/strict_fatbin.log | cut -c1-200
QOPT_RUNTIME_LIBRARY=$PWD/$D/bin/libqopt_runtime.so.0.3 QOPT_KERNEL_DIR=$PWD/$D/kn/fatbin:$PWD/$D/kn/host PYTHONPATH=$PWD/python \
  timeout 200 python3 -m pytest -q -p no:cacheprovider python/tests > $OUT/pytest.log 2>&1
echo "pytest rc=$?: $(tail -1 $OUT/pytest.log)"
