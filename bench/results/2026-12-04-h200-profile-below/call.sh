#!/usr/bin/env bash
# ncu source counts (SASS, executed) of the kernels below 0.88 that the
# session did not change, on its final build (4eea5bc), for the next one.
set -uo pipefail
C=$PWD/.carry/c6; tar -C $C -xJf $C/s.tar.xz; S=$C/s; B=$C/bin
R=$OUT/prof2; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1; } > $R/env.txt 2>&1; cat $R/env.txt
for item in flash_adamw4bit:FlashAdamW4bit ademamix8bit:AdEMAMix8bit adamw8bit_block256:AdamW8bit_block256 lamb8bit:LAMB8bit lamb8bit:LAMB8bit_reduce lars8bit:LARS8bit lars8bit:LARS8bit_reduce flash_adamw_linear:FlashAdamW_linear; do
  IFS=: read -r k n <<< "$item"
  timeout 100 ncu --clock-control none -k "regex:^$n\$" --launch-skip 12 --launch-count 1 \
    --section SourceCounters --page source --print-source sass --csv \
    $B/qopt-bench --kernels $S/fin --specs $k --sizes 64 --no-gpt2 --no-sweep --no-runtime > $R/src_$n.csv 2>&1
  echo "$n rc=$? $(wc -l < $R/src_$n.csv) lines"; gzip $R/src_$n.csv
done
cd $OUT && tar czf prof2.tar.gz prof2 && rm -rf prof2
