set -u
S=$OUT/c7; mkdir -p $S
date -u > $S/env.txt
for r in 1 2; do for s in c51 c61 c52 c41 c62 c71; do
  timeout 60 devrun/bin/qopt-bench --kernels devrun/kernels-$s --specs adamw8bit_block2048,adamw8bit_block256 --sizes 16,64,256 --no-sweep --no-runtime --json $S/b_${s}_$r.json > $S/b_${s}_$r.log 2>&1; echo "$s $r rc=$?"
done; done
tar czf $OUT/call7-claims-retune.tar.gz -C $OUT c7 && rm -rf $S
