#!/usr/bin/env python3
"""What an INT8 ResNet bottleneck path would save, from what was measured: a recorded run's
autotuned fp16 layer times and cnnbench_fp8_probe's timings of the INT8 forms. No GPU. Issue 9's
"predict each lever's effect before measuring it", for the INT8 network path (NOTES.md, "INT8 as
a network precision after call 139").

  python3 tools/int8_estimate.py --layers RUN.layers.json[.xz] --probe PROBE.json
                                 [--model REGEX] [--from-stage 2] [--out-md FILE]

The path: in each bottleneck of layer2 on (--from-stage), conv1 computes in fp16 and stores INT8
(the probe's fp16_to_int8, against fp16), conv2 runs INT8 into INT8 (int8_to_int8_per_channel,
against fp16), conv3 runs INT8 into fp16 with the residual add (int8_to_fp16_residual, against
fp16_residual; int8_to_fp16_per_channel against fp16 where the probe lacks the residual forms).
The downsample conv, the stem, layer1 and the classifier stay fp16.

A conv's ratio is the probe's (fp16 form's time over the INT8 form's) at that layer where the probe
ran it, else at the probe's layer of the same stage and conv (layer3.1.conv2 for layer3.4.conv2:
"same stage"), else 1 ("no probe": unchanged). Only forms whose output agreed with their emulation
count. A block goes INT8 only where its three convs together save time; the saving is the layer's
autotuned fp16 time times (1 - 1 / ratio). The base is the sum of the model's layer times (not its
graph time, which also holds the gaps between launches).
"""
import argparse
import json
import lzma
import re
import sys

BLOCK_CONV = re.compile(r"^layer(\d+)\.(\d+)\.conv([123])$")
# conv index -> (the INT8 form, the fp16 form it replaces), in order of preference
FORMS = {
    "1": [("fp16_to_int8", "fp16")],
    "2": [("int8_to_int8_per_channel", "fp16")],
    "3": [("int8_to_fp16_residual", "fp16_residual"), ("int8_to_fp16_per_channel", "fp16")],
}


class InputError(Exception):
    pass


def load_json(path):
    try:
        opener = lzma.open if path.endswith(".xz") else open
        with opener(path, "rt") as f:
            return json.load(f)
    except (OSError, lzma.LZMAError) as e:
        raise InputError(f"{path}: cannot read ({e})")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON (line {e.lineno}: {e.msg})")


def probe_times(doc, path):
    """{layer: {variant: best_us}} of the probe's forms that ran and agreed with their emulation."""
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        raise InputError(f"{path}: not a cnnbench_fp8_probe JSON (no 'cases' list)")
    out = {}
    for c in doc["cases"]:
        times = {}
        for v in c.get("variants", []):
            if v.get("agrees") and isinstance(v.get("best_us"), (int, float)) and v["best_us"] > 0:
                times[v["variant"]] = float(v["best_us"])
        out[c.get("layer", "?")] = times
    return out


def pick_model(doc, pattern, path):
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, list):
        raise InputError(f"{path}: not a layer table (no 'models' list)")
    rx = re.compile(pattern)
    hits = [m for m in models if rx.search(str(m.get("model", ""))) and "layers" in m]
    if not hits:
        names = ", ".join(str(m.get("model")) for m in models)
        raise InputError(f"{path}: no model matches '{pattern}' (it has: {names})")
    return hits[0]


def ratio_for(name, stage, conv, probe):
    """(ratio, INT8 form, source) for one bottleneck conv."""
    same_stage = sorted(k for k in probe if (m := BLOCK_CONV.match(k)) and m.group(1) == stage
                        and m.group(3) == conv)
    for where, layers in (("measured", [name] if name in probe else []),
                          ("same stage", same_stage)):
        for layer in layers:
            for int8, fp16 in FORMS[conv]:
                t = probe[layer]
                if int8 in t and fp16 in t:
                    src = where if where == "measured" else f"same stage ({layer})"
                    return t[fp16] / t[int8], int8, src
    return 1.0, FORMS[conv][0][0], "no probe"


def estimate(layers_doc, probe_doc, model_re, from_stage, layers_path="layers", probe_path="probe"):
    model = pick_model(layers_doc, model_re, layers_path)
    probe = probe_times(probe_doc, probe_path)
    total = sum(float(l.get("tuned_us") or 0) for l in model["layers"])
    blocks = {}
    for l in model["layers"]:
        m = BLOCK_CONV.match(l.get("name", ""))
        if not m or int(m.group(1)) < from_stage:
            continue
        stage, block, conv = m.groups()
        us = float(l.get("tuned_us") or 0)
        r, form, src = ratio_for(l["name"], stage, conv, probe)
        blocks.setdefault(f"layer{stage}.{block}", []).append(
            {"name": l["name"], "us": us, "ratio": r, "form": form, "source": src,
             "saved": us * (1 - 1 / r) if r > 0 else 0.0})
    rows, saved = [], 0.0
    for b, convs in blocks.items():
        s = sum(c["saved"] for c in convs)
        int8 = s > 0 and len(convs) == 3
        saved += s if int8 else 0.0
        rows.append({"block": b, "convs": convs, "saved": s, "int8": int8})
    return {"model": model["model"], "layers_us": total, "saved_us": saved, "blocks": rows}


def markdown(e):
    out = [f"# INT8 bottlenecks: an estimate for {e['model']}", "",
           "| block | conv | fp16 us | INT8 form | ratio | from | saved us |",
           "|---|---|---:|---|---:|---|---:|"]
    for b in e["blocks"]:
        for c in b["convs"]:
            out.append(f"| {b['block']} | {c['name'].rsplit('.', 1)[1]} | {c['us']:,.1f} | "
                       f"`{c['form']}` | {c['ratio']:.2f}x | {c['source']} | {c['saved']:,.1f} |")
        out.append(f"| **{b['block']}** | | | | | "
                   f"{'INT8' if b['int8'] else 'stays fp16'} | **{b['saved']:,.1f}** |")
    base, saved = e["layers_us"], e["saved_us"]
    pct = 100 * saved / base if base > 0 else 0.0
    out += ["", f"Of the layers' {base:,.1f} us, {saved:,.1f} us would go ({pct:.1f}%): from "
            f"{base:,.1f} to {base - saved:,.1f} us, {base / (base - saved):.3f}x the throughput "
            "where the layers are the whole time." if base > saved else "", ""]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", required=True, help="cnnbench's --layers_out (or .xz)")
    ap.add_argument("--probe", required=True, help="cnnbench_fp8_probe's --json")
    ap.add_argument("--model", default=r"^resnet\d+/fp16/batch:256$",
                    help="the layer table's model, a regex (default ResNet fp16 at 256)")
    ap.add_argument("--from-stage", type=int, default=2)
    ap.add_argument("--out-md")
    a = ap.parse_args(argv)
    try:
        e = estimate(load_json(a.layers), load_json(a.probe), a.model, a.from_stage, a.layers,
                     a.probe)
        if not e["blocks"]:
            raise InputError(f"{a.layers}: {e['model']} has no bottleneck convs "
                             f"(layerN.M.convK) from layer{a.from_stage} on")
    except InputError as err:
        print(f"int8_estimate: {err}", file=sys.stderr)
        return 2
    md = markdown(e)
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
