# tests/data/compare_fixture_h200.json: the ResNet-50 fp16 graph rows at batch 1 and 32 (five
# repetitions each) of a recorded H200 run of the suite's default sweep
# (results/2026-12-03_h200/call7/s/cnnbench.json, `cnnbench --config=configs/default.yaml`), cut with:
python3 - <<'PY'
import json, sys
sys.path.insert(0, 'tools')
import compare_pytorch as cp
doc = cp.read_benchmark_json('results/2026-12-03_h200/call7/s/cnnbench.json')
keep = [e for e in doc['benchmarks'] if e['name'].split('/')[:4] in
        (['resnet50', 'fp16', 'graph', 'batch:1'], ['resnet50', 'fp16', 'graph', 'batch:32'])]
json.dump({'context': doc['context'], 'benchmarks': keep},
          open('tests/data/compare_fixture_h200.json', 'w'), indent=1)
PY
