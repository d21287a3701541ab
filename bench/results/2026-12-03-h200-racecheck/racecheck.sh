#!/bin/bash
# One racecheck process per strict test, 6 at a time on one GPU.
cd "$(dirname "$0")"
export QOPT_TEST_KERNEL_DIR=$PWD/ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/env.txt
compute-sanitizer --version | tail -1 >> $OUT/env.txt
./qopt-gpu-tests --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}' > tests.txt
mkdir -p logs
run1() { t=$1; f=logs/$(echo $t | tr '/' '_').log; s=$(date +%s)
  timeout 480 compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 ./qopt-gpu-tests --gtest_filter="$t" --gtest_brief=1 > $f 2>&1; rc=$?
  echo "$t rc=$rc $(( $(date +%s) - s ))s $(grep -o 'ERROR SUMMARY.*\|RACECHECK SUMMARY.*' $f | tr '\n' ' ')"; }
export -f run1
xargs -P 6 -I{} bash -c 'run1 {}' < tests.txt | tee $OUT/racecheck.txt
tar czf $OUT/racecheck_logs.tgz logs
