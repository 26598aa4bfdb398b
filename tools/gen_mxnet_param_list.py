#!/usr/bin/env python3
"""Write the parameter lists of MXNet's Inception-BN and AlexNet symbols, without MXNet.

A small pure-Python mirror of the two MXNet symbols the seed benchmark (MXNet's
example/image-classification/benchmark_score.py) ran, with MXNet's naming, argument order and shape
inference, so that our native alexnet_lrn / inception_bn can be checked name by name:

  tests/data/inception_bn_mxnet_params.txt   symbols/inception-bn.py, input 3x224x224
  tests/data/alexnet_lrn_mxnet_params.txt    symbols/alexnet.py, input 3x227x227

Line format as tools/gen_state_dict_list.py writes for torchvision ("<name> float32 <d0,d1,...>"):
first the arguments in the order of MXNet's Symbol.list_arguments() (a depth-first, post-order walk
from the output that visits each operator's inputs in order: data, weight, bias for Convolution and
FullyConnected, data, gamma, beta for BatchNorm), without the two inputs that are not parameters
("data" and "softmax_label"); then the auxiliary states in list_auxiliary_states() order (BatchNorm's
moving_mean, moving_var). Lines starting with '#' are comments: the generator, the input shape, and
at the end the entry count, the trainable parameter count (arguments only: auxiliary states are
not trained) and the conv + fully-connected multiply-accumulates per image.

Structure, as read from apache/mxnet example/image-classification/symbols/ (networks.md 2.2, 4):
  inception-bn.py  ConvFactory = Convolution 'conv_<name><suffix>' (bias on: MXNet's no_bias
                   defaults to false) -> BatchNorm 'bn_<name><suffix>' (fix_gamma=False,
                   eps=1e-10+1e-5, momentum 0.9; gamma, beta, aux moving_mean, moving_var) -> ReLU;
                   InceptionFactoryA/B; the network for inputs larger than 28 px; every Pooling uses
                   MXNet's default pooling_convention 'valid' (floor); global_pool is a 7x7 avg pool;
                   Flatten -> FullyConnected 'fc1' -> SoftmaxOutput 'softmax'. (Older copies of the
                   file leave that FullyConnected unnamed, which MXNet would call
                   'fullyconnected0'; the pretrained imagenet1k-inception-bn checkpoint and
                   networks.md name it fc1.)
  alexnet.py       conv1 (96, k11 s4, no pad) -> ReLU -> LRN -> max pool 3/2; conv2 (256, k5 p2)
                   -> ReLU -> LRN -> max pool 3/2; conv3 (384), conv4 (384), conv5 (256), k3 p1,
                   ReLU; max pool 3/2; Flatten; fc1 4096, fc2 4096, fc3 num_classes (ReLU and
                   Dropout 0.5 between); SoftmaxOutput. LRN alpha 1e-4, beta 0.75, knorm 2,
                   nsize 5 (no parameters). Unnamed operators get MXNet's automatic names
                   (<op>0, <op>1, ...), which carry no parameters here.

Counts asserted (networks.md, computed there, not published): inception_bn 11,295,240 parameters and
1.987 GMACs at 224; alexnet_lrn 62,378,344 at 227 and 50,844,008 at 224 (1.135 / 1.010 GMACs).
Stdlib only; importable (the tests call inception_bn(), alexnet_lrn() and infer()).

Usage: python3 tools/gen_mxnet_param_list.py [--out-dir tests/data] [--networks inception_bn,alexnet_lrn]
"""
import argparse
import os
import sys

# --------------------------------------------------------------------------------------------
# A minimal symbol graph
# --------------------------------------------------------------------------------------------
# Per operator: its parameter inputs after "data", as (suffix, auxiliary?). MXNet creates a
# variable "<op name>_<suffix>" for each one not given explicitly.
OP_PARAMS = {
    "Convolution": (("weight", False), ("bias", False)),
    "FullyConnected": (("weight", False), ("bias", False)),
    "BatchNorm": (("gamma", False), ("beta", False), ("moving_mean", True), ("moving_var", True)),
    "SoftmaxOutput": (("label", False),),
}


class Node:
    """A variable (op None) or an operator with named attributes and input nodes."""

    def __init__(self, op, name, inputs=(), aux=False, **attrs):
        self.op, self.name, self.inputs, self.aux, self.attrs = op, name, list(inputs), aux, attrs


class NameManager:
    """MXNet's automatic operator names: lower-cased op name and a per-op counter."""

    def __init__(self):
        self.counts = {}

    def get(self, name, op):
        if name is not None:
            return name
        key = op.lower()
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        return f"{key}{n}"


class Builder:
    """mx.symbol-like constructors: each returns the operator node (its single output)."""

    def __init__(self):
        self.names = NameManager()

    def variable(self, name):
        return Node(None, name)

    def _op(self, op, inputs, name, **attrs):
        name = self.names.get(name, op)
        params = [p for p in OP_PARAMS.get(op, ())
                  if not (p[0] == "bias" and attrs.get("no_bias", False))]
        inputs = list(inputs) + [Node(None, f"{name}_{suffix}", aux=aux) for suffix, aux in params]
        return Node(op, name, inputs, **attrs)

    def convolution(self, data, num_filter, kernel, stride=(1, 1), pad=(0, 0), num_group=1,
                    no_bias=False, name=None):
        return self._op("Convolution", [data], name, num_filter=num_filter, kernel=kernel,
                        stride=stride, pad=pad, num_group=num_group, no_bias=no_bias)

    def batch_norm(self, data, eps=1e-3, momentum=0.9, fix_gamma=True, name=None):
        return self._op("BatchNorm", [data], name, eps=eps, momentum=momentum,
                        fix_gamma=fix_gamma)

    def activation(self, data, act_type, name=None):
        return self._op("Activation", [data], name, act_type=act_type)

    def pooling(self, data, kernel, pool_type, stride=(1, 1), pad=(0, 0),
                pooling_convention="valid", name=None):
        return self._op("Pooling", [data], name, kernel=kernel, pool_type=pool_type,
                        stride=stride, pad=pad, pooling_convention=pooling_convention)

    def lrn(self, data, alpha, beta, knorm, nsize, name=None):
        return self._op("LRN", [data], name, alpha=alpha, beta=beta, knorm=knorm, nsize=nsize)

    def concat(self, *data, name=None):
        return self._op("Concat", data, name, dim=1)

    def flatten(self, data, name=None):
        return self._op("Flatten", [data], name)

    def fully_connected(self, data, num_hidden, no_bias=False, name=None):
        return self._op("FullyConnected", [data], name, num_hidden=num_hidden, no_bias=no_bias)

    def dropout(self, data, p, name=None):
        return self._op("Dropout", [data], name, p=p)

    def softmax_output(self, data, name=None):
        return self._op("SoftmaxOutput", [data], name)


# --------------------------------------------------------------------------------------------
# Shape inference
# --------------------------------------------------------------------------------------------
def _window(x, k, s, p, ceil=False):
    span = x + 2 * p - k
    if span < 0:
        raise ValueError(f"window {k} (pad {p}) larger than the input {x}")
    return (-(-span // s) if ceil else span // s) + 1


def post_order(head):
    """Every node reachable from `head`, inputs before users, each input list in order."""
    order, seen, stack = [], set(), [(head, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((i, False) for i in reversed(node.inputs) if id(i) not in seen)
    return order


def infer(head, data_shape):
    """Shapes for a symbol whose variable "data" has `data_shape` (N, C, H, W).

    Returns {"arguments": [(name, shape)], "aux": [(name, shape)], "macs": int per image,
    "output": shape}; arguments and aux in MXNet's list_arguments / list_auxiliary_states order
    (both include every variable; "data" and "softmax_label" are among the arguments).
    """
    shapes = {}  # id(node) -> shape of its output (variables: their own shape)
    macs = 0  # per image: the batch dimension is not multiplied in
    order = post_order(head)
    for node in order:
        if node.op is None:
            if node.name == "data":
                shapes[id(node)] = tuple(data_shape)
            continue  # parameters get their shape from the operator that reads them
        a = node.attrs
        x = shapes[id(node.inputs[0])]
        params = node.inputs[1:]
        if node.op == "Convolution":
            n, c, h, w = x
            (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["pad"]
            g, f = a["num_group"], a["num_filter"]
            out = (n, f, _window(h, kh, sh, ph), _window(w, kw, sw, pw))
            pshapes = [(f, c // g, kh, kw), (f,)]
            macs += f * out[2] * out[3] * (c // g) * kh * kw
        elif node.op == "FullyConnected":
            n = x[0]
            k = 1
            for d in x[1:]:
                k *= d
            out = (n, a["num_hidden"])
            pshapes = [(a["num_hidden"], k), (a["num_hidden"],)]
            macs += k * a["num_hidden"]
        elif node.op == "BatchNorm":
            out, pshapes = x, [(x[1],)] * 4
        elif node.op == "Pooling":
            n, c, h, w = x
            (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["pad"]
            ceil = a["pooling_convention"] == "full"
            out = (n, c, _window(h, kh, sh, ph, ceil), _window(w, kw, sw, pw, ceil))
            pshapes = []
        elif node.op == "Concat":
            ins = [shapes[id(i)] for i in node.inputs]
            if any(s[:1] + s[2:] != ins[0][:1] + ins[0][2:] for s in ins):
                raise ValueError(f"{node.name}: inputs {ins} differ outside the channel axis")
            out = (x[0], sum(s[1] for s in ins)) + tuple(x[2:])
            params, pshapes = [], []
        elif node.op == "Flatten":
            k = 1
            for d in x[1:]:
                k *= d
            out, pshapes = (x[0], k), []
        elif node.op == "SoftmaxOutput":
            out, pshapes = x, [(x[0],)]
        elif node.op in ("Activation", "LRN", "Dropout"):
            out, pshapes = x, []
        else:
            raise ValueError(f"no shape rule for {node.op}")
        for p, s in zip(params, pshapes):
            shapes[id(p)] = s
        shapes[id(node)] = out
    variables = [v for v in order if v.op is None]
    return {"arguments": [(v.name, shapes[id(v)]) for v in variables if not v.aux],
            "aux": [(v.name, shapes[id(v)]) for v in variables if v.aux],
            "macs": macs, "output": shapes[id(head)]}


# --------------------------------------------------------------------------------------------
# The two symbols
# --------------------------------------------------------------------------------------------
BN_EPS = 1e-10 + 1e-5  # inception-bn.py's eps (no effect on shapes)


def inception_bn(num_classes=1000, input_size=224):
    """symbols/inception-bn.py get_symbol for images larger than 28 px."""
    if input_size <= 28:
        raise ValueError("only the network for inputs larger than 28 px is mirrored")
    mx = Builder()

    def conv_factory(data, num_filter, kernel, stride=(1, 1), pad=(0, 0), name=None, suffix=""):
        conv = mx.convolution(data, num_filter, kernel, stride, pad, name=f"conv_{name}{suffix}")
        bn = mx.batch_norm(conv, eps=BN_EPS, momentum=0.9, fix_gamma=False,
                           name=f"bn_{name}{suffix}")
        return mx.activation(bn, "relu", name=f"relu_{name}{suffix}")

    def factory_a(data, n1x1, n3x3red, n3x3, nd3x3red, nd3x3, pool, proj, name):
        c1x1 = conv_factory(data, n1x1, (1, 1), name=f"{name}_1x1")
        c3x3r = conv_factory(data, n3x3red, (1, 1), name=f"{name}_3x3", suffix="_reduce")
        c3x3 = conv_factory(c3x3r, n3x3, (3, 3), pad=(1, 1), name=f"{name}_3x3")
        cd3x3r = conv_factory(data, nd3x3red, (1, 1), name=f"{name}_double_3x3", suffix="_reduce")
        cd3x3 = conv_factory(cd3x3r, nd3x3, (3, 3), pad=(1, 1), name=f"{name}_double_3x3_0")
        cd3x3 = conv_factory(cd3x3, nd3x3, (3, 3), pad=(1, 1), name=f"{name}_double_3x3_1")
        pooling = mx.pooling(data, (3, 3), pool, stride=(1, 1), pad=(1, 1),
                             name=f"{pool}_pool_{name}_pool")
        cproj = conv_factory(pooling, proj, (1, 1), name=f"{name}_proj")
        return mx.concat(c1x1, c3x3, cd3x3, cproj, name=f"ch_concat_{name}_chconcat")

    def factory_b(data, n3x3red, n3x3, nd3x3red, nd3x3, name):
        c3x3r = conv_factory(data, n3x3red, (1, 1), name=f"{name}_3x3", suffix="_reduce")
        c3x3 = conv_factory(c3x3r, n3x3, (3, 3), pad=(1, 1), stride=(2, 2), name=f"{name}_3x3")
        cd3x3r = conv_factory(data, nd3x3red, (1, 1), name=f"{name}_double_3x3", suffix="_reduce")
        cd3x3 = conv_factory(cd3x3r, nd3x3, (3, 3), pad=(1, 1), name=f"{name}_double_3x3_0")
        cd3x3 = conv_factory(cd3x3, nd3x3, (3, 3), pad=(1, 1), stride=(2, 2),
                             name=f"{name}_double_3x3_1")
        pooling = mx.pooling(data, (3, 3), "max", stride=(2, 2), pad=(1, 1),
                             name=f"max_pool_{name}_pool")
        return mx.concat(c3x3, cd3x3, pooling, name=f"ch_concat_{name}_chconcat")

    data = mx.variable("data")
    conv1 = conv_factory(data, 64, (7, 7), stride=(2, 2), pad=(3, 3), name="1")
    pool1 = mx.pooling(conv1, (3, 3), "max", stride=(2, 2), name="pool_1")
    conv2red = conv_factory(pool1, 64, (1, 1), name="2_red")
    conv2 = conv_factory(conv2red, 192, (3, 3), pad=(1, 1), name="2")
    pool2 = mx.pooling(conv2, (3, 3), "max", stride=(2, 2), name="pool_2")
    in3a = factory_a(pool2, 64, 64, 64, 64, 96, "avg", 32, "3a")
    in3b = factory_a(in3a, 64, 64, 96, 64, 96, "avg", 64, "3b")
    in3c = factory_b(in3b, 128, 160, 64, 96, "3c")
    in4a = factory_a(in3c, 224, 64, 96, 96, 128, "avg", 128, "4a")
    in4b = factory_a(in4a, 192, 96, 128, 96, 128, "avg", 128, "4b")
    in4c = factory_a(in4b, 160, 128, 160, 128, 160, "avg", 128, "4c")
    in4d = factory_a(in4c, 96, 128, 192, 160, 192, "avg", 128, "4d")
    in4e = factory_b(in4d, 128, 192, 192, 256, "4e")
    in5a = factory_a(in4e, 352, 192, 320, 160, 224, "avg", 128, "5a")
    in5b = factory_a(in5a, 352, 192, 320, 192, 224, "max", 128, "5b")
    pool = mx.pooling(in5b, (7, 7), "avg", stride=(1, 1), name="global_pool")
    flatten = mx.flatten(pool)
    fc1 = mx.fully_connected(flatten, num_classes, name="fc1")
    return mx.softmax_output(fc1, name="softmax")


def alexnet_lrn(num_classes=1000, input_size=227):
    """symbols/alexnet.py get_symbol (input_size only documents the default; shapes come later)."""
    mx = Builder()
    data = mx.variable("data")
    conv1 = mx.convolution(data, 96, (11, 11), stride=(4, 4), name="conv1")
    relu1 = mx.activation(conv1, "relu")
    lrn1 = mx.lrn(relu1, alpha=0.0001, beta=0.75, knorm=2, nsize=5)
    pool1 = mx.pooling(lrn1, (3, 3), "max", stride=(2, 2))
    conv2 = mx.convolution(pool1, 256, (5, 5), pad=(2, 2), name="conv2")
    relu2 = mx.activation(conv2, "relu")
    lrn2 = mx.lrn(relu2, alpha=0.0001, beta=0.75, knorm=2, nsize=5)
    pool2 = mx.pooling(lrn2, (3, 3), "max", stride=(2, 2))
    conv3 = mx.convolution(pool2, 384, (3, 3), pad=(1, 1), name="conv3")
    relu3 = mx.activation(conv3, "relu")
    conv4 = mx.convolution(relu3, 384, (3, 3), pad=(1, 1), name="conv4")
    relu4 = mx.activation(conv4, "relu")
    conv5 = mx.convolution(relu4, 256, (3, 3), pad=(1, 1), name="conv5")
    relu5 = mx.activation(conv5, "relu")
    pool3 = mx.pooling(relu5, (3, 3), "max", stride=(2, 2))
    flatten = mx.flatten(pool3)
    fc1 = mx.fully_connected(flatten, 4096, name="fc1")
    relu6 = mx.activation(fc1, "relu")
    dropout1 = mx.dropout(relu6, p=0.5)
    fc2 = mx.fully_connected(dropout1, 4096, name="fc2")
    relu7 = mx.activation(fc2, "relu")
    dropout2 = mx.dropout(relu7, p=0.5)
    fc3 = mx.fully_connected(dropout2, num_classes, name="fc3")
    return mx.softmax_output(fc3, name="softmax")


# name -> (builder, default input size, MXNet source file)
NETWORKS = {
    "inception_bn": (inception_bn, 224, "example/image-classification/symbols/inception-bn.py"),
    "alexnet_lrn": (alexnet_lrn, 227, "example/image-classification/symbols/alexnet.py"),
}
# (network, input size) -> (trainable parameters, GMACs rounded to 3 places); networks.md 2.2, 4.
EXPECTED = {
    ("inception_bn", 224): (11_295_240, 1.987),
    ("alexnet_lrn", 227): (62_378_344, 1.135),
    ("alexnet_lrn", 224): (50_844_008, 1.010),
}
NOT_PARAMETERS = ("data", "softmax_label")  # arguments that are inputs, not weights


def param_list(network, input_size=None, num_classes=1000):
    """(entries [(name, shape)]: parameters then auxiliary states, trainable count, MACs)."""
    build, default_size, _ = NETWORKS[network]
    size = input_size or default_size
    info = infer(build(num_classes=num_classes, input_size=size), (1, 3, size, size))
    args = [(n, s) for n, s in info["arguments"] if n not in NOT_PARAMETERS]
    n_params = 0
    for _, s in args:
        k = 1
        for d in s:
            k *= d
        n_params += k
    return args + info["aux"], n_params, info["macs"]


def list_text(network, input_size=None):
    """The file's text, and (entries, trainable parameters, MACs)."""
    _, default_size, source = NETWORKS[network]
    size = input_size or default_size
    entries, n_params, macs = param_list(network, size)
    lines = [f"# generated by: python3 tools/gen_mxnet_param_list.py (a mirror of MXNet's "
             f"{source}, input 3x{size}x{size}, 1000 classes)",
             "# arguments in list_arguments() order without data and softmax_label, then the "
             "auxiliary states in list_auxiliary_states() order"]
    lines += [f"{name} float32 {','.join(str(d) for d in shape)}" for name, shape in entries]
    lines += [f"# entries: {len(entries)}", f"# trainable parameters: {n_params}",
              f"# conv+fc MACs per image: {macs}"]
    return "\n".join(lines) + "\n", (entries, n_params, macs)


def check_expected(network, size, n_params, macs):
    """Error messages where the counts differ from EXPECTED (none if no expectation)."""
    want = EXPECTED.get((network, size))
    if want is None:
        return []
    errors = []
    if n_params != want[0]:
        errors.append(f"{network} at {size}: {n_params:,} parameters, expected {want[0]:,}")
    if round(macs / 1e9, 3) != want[1]:
        errors.append(f"{network} at {size}: {macs / 1e9:.4f} GMACs, expected {want[1]}")
    return errors


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default=os.path.join(here, "..", "tests", "data"))
    ap.add_argument("--networks", default=",".join(NETWORKS))
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.networks.split(",") if n.strip()]
    for n in names:
        if n not in NETWORKS:
            ap.error(f"unknown network {n!r}; valid: {', '.join(NETWORKS)}")
    os.makedirs(args.out_dir, exist_ok=True)
    errors = []
    for network in names:
        text, (entries, n_params, macs) = list_text(network)
        path = os.path.normpath(os.path.join(args.out_dir, f"{network}_mxnet_params.txt"))
        with open(path, "w") as f:
            f.write(text)
        size = NETWORKS[network][1]
        print(f"{path}: {len(entries)} entries, {n_params:,} trainable parameters, "
              f"{macs / 1e9:.3f} GMACs at {size}")
        errors += check_expected(network, size, n_params, macs)
        for (net, other), _ in EXPECTED.items():  # the other sizes networks.md gives counts for
            if net == network and other != size:
                _, p, m = param_list(network, other)
                print(f"  at {other}: {p:,} trainable parameters, {m / 1e9:.3f} GMACs")
                errors += check_expected(network, other, p, m)
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
