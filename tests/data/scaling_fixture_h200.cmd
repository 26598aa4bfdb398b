# tests/data/scaling_fixture_h200.json: the fp16 entries of a recorded H200 run of the suite's
# default sweep (results/2026-12-03_h200/call7/s/cnnbench.json, device call 7 of 2026-12-03:
# `cnnbench --config=configs/default.yaml`, ResNet-50 at batch 1 to 256), cut down with:
python3 - <<'PY'
import json, sys
sys.path.insert(0, 'tools')
import compare_pytorch as cp
doc = cp.read_benchmark_json('results/2026-12-03_h200/call7/s/cnnbench.json')
keep = [e for e in doc['benchmarks'] if e['name'].startswith('resnet50/fp16/graph/')]
json.dump({'context': doc['context'], 'benchmarks': keep},
          open('tests/data/scaling_fixture_h200.json', 'w'), indent=1)
PY
