set -u
for r in 1 2; do for s in head head5 bulk bulk5; do
  timeout 60 devrun/bin/qopt-bench --kernels devrun/kernels-$s --specs flash_adamw,flash_lion --sizes 64,256 --no-gpt2 --no-sweep --no-runtime --json /dev/null --csv /dev/null > /tmp/b.log 2>&1
  echo "bench $s $r rc=$?"; sed -n '/GB\/s (fraction of roof)/,$p' /tmp/b.log | sed "s/^/$s  /" | cut -c1-120 | sed -n 2,3p
done; done
