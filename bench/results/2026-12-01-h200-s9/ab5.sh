set -u
export OUT
D=devB
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/env.txt; date -u >> $R/env.txt
SP=flash_adamw,flash_adam,flash_adamw_ecc16,flash_lion
for r in 1 2 3; do
  for s in cur pf4 pf8; do
    stamp "round $r $s"
    timeout 100 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $SP --sizes 64,256 --no-gpt2 --no-sweep --no-runtime --json $R/b_${s}_$r.json > $R/b_${s}_$r.log 2>&1
    grep -E "^== |^   (64Mi|256Mi)|roof used" $R/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-110
  done
done
stamp done
tar czf $OUT/call5.tar.gz -C $OUT r && rm -rf $R
