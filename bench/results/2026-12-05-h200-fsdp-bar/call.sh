#!/usr/bin/env bash
# Why test_train_fsdp.py[2to4-flash_adamw] fails (call py of 2026-12-05):
# FlashAdamW's 2-process run and its 4-process resume (the test's TINY
# arguments, gloo, host backend) with main's host kernels (`new`) and with
# ab1600a's (`old`, before the float16 scales' underflow rule); per tensor
# the NMSE of the resumed run's final weights against the uninterrupted one.
set -uo pipefail
source bench/device_call.sh
device_call_begin fsdp .carry/c4
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
cp -r "$C/x/build" "$C/old"
cp "$C"/oldhost/*.so "$C/old/kernels/host/"
TINY="--layers 2 --d-model 64 --heads 4 --seq 32 --batch 8 --steps 12 --warmup 2 --corpus-bytes 400000 --device cpu --backend gloo"
run() { # TREE TAG WORLD ARGS...
  local tree=$1 tag=$2 w=$3; shift 3
  QOPT_BUILD_DIR=$tree PYTHONPATH=$PWD/python OMP_NUM_THREADS=1 timeout 200 python3 -m torch.distributed.run \
    --standalone --nproc_per_node=$w python/examples/train_gpt_fsdp.py $TINY "$@" \
    > "$R/$tag.log" 2>&1
  echo "$tag rc=$?"
}
for t in new old; do
  tree=$C/x/build; [ $t = old ] && tree=$C/old
  mkdir -p "$R/$t"
  (run "$tree" "$t-w2" 2 --opt flash_adamw --save-at 6 --ckpt "$R/$t/ck2" --csv "$R/$t/w2.csv" --save-weights "$R/$t/w2.pt" &&
   run "$tree" "$t-w4" 4 --opt flash_adamw --resume "$R/$t/ck2" --csv "$R/$t/w4.csv" --save-weights "$R/$t/w4.pt") &
done
wait
stamp nmse
python3 - "$R" <<'PY' | tee "$R/nmse.txt"
import sys, torch
R = sys.argv[1]
for t in ("new", "old"):
    a = torch.load(f"{R}/{t}/w4.pt", weights_only=True); b = torch.load(f"{R}/{t}/w2.pt", weights_only=True)
    rows = []
    for n in b:
        x, y = a[n].double().reshape(-1), b[n].double().reshape(-1)
        nmse = float(((x - y) ** 2).sum() / (y ** 2).sum().clamp_min(1e-30))
        rows.append((nmse, n, float((x - y).abs().max())))
    rows.sort(reverse=True)
    print(t, "top NMSE:", [(n, f"{e:.2e}", f"maxdiff {d:.1e}") for e, n, d in rows[:4]])
    q = "blocks.0.qkv.bias"
    if q in b:
        x, y = a[q].float(), b[q].float(); k = x.numel() // 3
        for part, s in (("q", slice(0, k)), ("k", slice(k, 2 * k)), ("v", slice(2 * k, 3 * k))):
            print(t, q, part, "|w2| max %.2e" % y[s].abs().max(), "|diff| max %.2e" % (x[s] - y[s]).abs().max())
PY
rm -rf "$R"/new/ck2 "$R"/old/ck2
device_call_end
