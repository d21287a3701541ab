# The one device call (kind nvidia-h200, timeout_s=300), from the root of a checkout whose
# .carry/mg/payload.tar.xz holds tree/{python,scripts} of this commit and tree/build/kernels/{fatbin,host}
# + tree/build/runtime/libqopt_runtime.so* built from it (10.2 MB with xz):
cd .carry/mg && tar xJf payload.tar.xz && cd tree && export QOPT_BUILD_DIR=$PWD/build && PYTEST=1 timeout 255 bash scripts/multi_gpu_29.sh $OUT/r > $OUT/r.log 2>&1; echo "script exit $?" >> $OUT/r.log; tar -C $OUT -czf $OUT/prep.tgz r r.log && rm -rf $OUT/r
