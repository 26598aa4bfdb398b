#!/usr/bin/env bash
# Device call 62 (written 2026-12-05): issue 7's GEMM ceilings and issue 10's soak, with issue 9's
# plan cache on its first GPU run.
# G: --gemm_ceiling alone (fp16, bf16, tf32; 5 repetitions): the ceilings the report divides by
#    (call 18 measured fp16 only: 659 TFLOP/s on the H200).
# Q: the default sweep three times in one process (--soak=3) with one --plan_cache file: passes 2
#    and 3 should take their plans from the cache (prepare_s falling); tools/check_soak.py
#    judges memory back to the baseline, no RSS growth, throughput within noise.
# Carry: build/release/cnnbench, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/g $O/q
END=$((SECONDS + ${BUDGET:-560}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
timeout $(lim 90) $B/cnnbench --config=configs/default.yaml --gemm_ceiling --benchmark_filter='gemm/' \
  --benchmark_repetitions=5 --benchmark_out=$O/g/gemm.json >$O/g/gemm.log 2>&1
echo "G rc=$? ${SECONDS}s"; grep -E "_median|ERROR" $O/g/gemm.log | cut -c1-160
(cd $O && tar czf g.tgz --remove-files g)
timeout $(lim 440) $B/cnnbench --config=configs/default.yaml --soak=3 --plan_cache=$O/q/plans.json \
  --benchmark_out=$O/q/soak.json >$O/q/soak.log 2>&1
echo "Q rc=$? ${SECONDS}s"; grep -E "soak/pass|ERROR|plan cache" $O/q/soak.log | cut -c1-200 | head -12
J=$O/q/soak.json; [ -s $J ] && python3 -c "import json,sys; json.load(open(sys.argv[1]))" $J 2>/dev/null || J=$O/q/soak.jsonl
python3 tools/check_soak.py $J --out-md $O/q/soak.md; echo "check_soak rc=$?"
python3 -c "
import json,sys,collections
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()] if sys.argv[1].endswith('l') else json.load(open(sys.argv[1]))['benchmarks']
p=collections.defaultdict(list)
for r in rows:
  n=r.get('name','')
  if 'pass:' in n and r.get('prepare_s') is not None: p[n.split('pass:')[1].split('/')[0]].append(r['prepare_s'])
for k,v in sorted(p.items()): print('pass', k, 'prepare_s sum', round(sum(v),1), 'over', len(v))
" $J 2>&1 | head
(cd $O && tar czf q.tgz --remove-files q)
echo "end ${SECONDS}s"
