set -u
export OUT
date -u
QOPT_BENCH_BUILD=devrun/bench QOPT_BENCH_KERNELS=devrun/bench/kernels-head QOPT_BENCH_KERNELS_PRE=devrun/bench/kernels-pre \
  QOPT_TOP_BUILD=/nonexistent bash bench/run_h200.sh 2>&1 | grep -vE "^\s+(self-check|[0-9]+Mi )" | tail -60
cd $OUT && tar czf extras.tar.gz torch.json && rm -f torch.json; ls -la $OUT
