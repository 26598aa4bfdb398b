#!/usr/bin/env bash
# Device call 109 (written 2026-12-06 06:40 UTC, not yet run): issue 10's generator and detector
# cells that timed out or never started when they shared the machine (results/sanitizer_matrix.md),
# now ONE tool process at a time (call 102: StyleGAN-XL's sanitizer process alone held 116 GB of
# host memory, and six at once starved the host). Two parts of about 560 s, each its own call:
#   STEPS=A: StyleGAN2-F fp32 memcheck, initcheck, synccheck (call 76: timed out at 115 to 120 s
#            beside eight others, the rest never started); StyleGAN-XL fp16 synccheck with blocking
#            launches (call 102: 72 launches unchecked beside five others; fp32 alone was clean in
#            127 s, call 106); the racecheck of the four generators and YOLOR under call108.sh's
#            exclusions if time is left.
#   STEPS=B: StyleGAN-XL fp16 memcheck and initcheck (call 102: over 300 s beside five others),
#            then YOLOR-CSP-X fp16 initcheck at its default size (over 433 s beside others).
#   STEPS=C: StyleGAN-XL fp32 memcheck and initcheck, YOLOR-CSP-X fp32 initcheck.
# Predicted: 0 errors wherever a run finishes; StyleGAN-XL and YOLOR under initcheck may still
# need more than 250 s a run alone.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-560}))
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
san() {  # out_dir net precision tools [extra env...]
  local d=$1 net=$2 p=$3 tools=$4
  shift 4
  ((END - SECONDS < 40)) && { echo "skip $d (budget)"; return; }
  mkdir -p $O/$(dirname $d)
  env "$@" NETS="$net" PRECISIONS="$p" MODES=infer TOOLS="$tools" RUN_TIMEOUT=$((END - SECONDS - 10)) \
    BUDGET=$((END - SECONDS)) bash tools/sanitize_gpu.sh $O/$d >$O/$d.log 2>&1
  echo "$d rc=$? ${SECONDS}s"; grep -E "^\| [a-z]" $O/$d/summary.md | grep -v "^| network"
}
for s in ${STEPS:-A}; do
  case $s in
    A)
      san a/sg2f stylegan2_f fp32 "memcheck initcheck synccheck" BLOCKING=1
      san a/sgxl stylegan_xl fp16 synccheck BLOCKING=1
      san a/race "stylegan2_f stylegan3_t stylegan_xl yolor_csp_x" "fp16 fp32" racecheck \
        EXCLUDE_KERNELS="kns=nvjet kns=xmma kns=cudnn kns=cutlass"
      ;;
    B)
      san b/sgxl stylegan_xl fp16 "memcheck initcheck"
      san b/yolor yolor_csp_x fp16 initcheck
      ;;
    C)
      san c/sgxl stylegan_xl fp32 "memcheck initcheck"
      san c/yolor yolor_csp_x fp32 initcheck
      ;;
  esac
done
(cd $O && tar czf call109.tgz --remove-files $(ls -d a b c 2>/dev/null))
echo "call109 end ${SECONDS}s"
