# tests/data/report_fixture_h200.json: entries of a recorded H200 run of the suite
# (results/2026-12-03_h200/call9/m/cnnbench.json, `cnnbench --config=configs/mxnet_benchmark_score.yaml`),
# cut down with:
python3 - <<'PY'
import json, sys
sys.path.insert(0, 'tools')
import compare_pytorch as cp
doc = cp.read_benchmark_json('results/2026-12-03_h200/call9/m/cnnbench.json')
keep = [e for e in doc['benchmarks'] if any(e['name'].startswith(p) for p in (
    'vgg16/fp16/graph/batch:32/', 'vgg16/fp16/graph/batch:1/', 'alexnet_lrn/fp16/graph/batch:32/',
    'inception_bn/fp16/graph/batch:32/'))]
json.dump({'context': doc['context'], 'benchmarks': keep},
          open('tests/data/report_fixture_h200.json', 'w'), indent=1)
PY
