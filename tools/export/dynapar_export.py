#!/usr/bin/python3
"""Exports a PyTorch model as a chain of segments that dynapar trains as layers.

    /usr/bin/python3 tools/export/dynapar_export.py resnet18 --input 1,28,28 --in-channels 1 \\
        --kwargs '{"num_classes": 10}' --out resnet18.pt
    /usr/bin/python3 tools/export/dynapar_export.py my_models.py:make_net --input 3,32,32 --out net.pt

MODEL is a torchvision model name, or FILE.py:FUNCTION / package.module:FUNCTION returning an
nn.Module. The model's graph is traced with torch.fx and cut where exactly one tensor is alive
between the parts, following the model's own blocks (a module with children of its own, such
as a ResNet BasicBlock or a TransformerEncoderLayer, is a segment; the plain layers between
blocks join into one segment: a ResNet becomes stem, its 8 blocks, head). Each segment is
scripted; the chain is checked bit for bit against the model's own forward before it is
written. The file carries a dynapar.json entry: the input shape, the classes, the segments.

What it cannot split: data-dependent control flow (torch.fx cannot trace it; the error says
where), several tensors alive across a cut (no cut is made there: those parts stay one
segment), and weights shared by two segments (tied weights: the segments between are merged).
"""
import argparse
import contextlib
import functools
import io
import warnings
import importlib
import importlib.util
import inspect
import json
import operator
import os
import sys
from collections import OrderedDict

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


class ExportError(Exception):
    pass


def load_model(spec, kwargs, seed=0):
    if ":" not in spec:
        import torchvision.models as tvm

        if not hasattr(tvm, spec):
            raise ExportError(f"'{spec}' is not a torchvision model; give FILE.py:FUNCTION or module:FUNCTION for your own")
        model = getattr(tvm, spec)(**kwargs)
        # GoogLeNet and Inception v3 return their auxiliary heads' outputs too in training:
        # dynapar trains the main output, built without them (unless --kwargs says).
        if getattr(model, "aux_logits", False) is True and "aux_logits" not in kwargs:
            print("auxiliary heads off (aux_logits=False): the main output is trained")
            torch.manual_seed(seed)
            model = getattr(tvm, spec)(**dict(kwargs, aux_logits=False))
        return model
    where, fn = spec.rsplit(":", 1)
    if where.endswith(".py"):
        loader = importlib.util.spec_from_file_location("user_model", where)
        if loader is None:
            raise ExportError(f"cannot read {where}")
        mod = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(mod)
    else:
        mod = importlib.import_module(where)
    if not hasattr(mod, fn):
        raise ExportError(f"{where} has no '{fn}'")
    model = getattr(mod, fn)(**kwargs)
    if not isinstance(model, nn.Module):
        raise ExportError(f"{spec} returned {type(model).__name__}, not an nn.Module")
    return model


def set_in_channels(model, channels):
    """The first Conv2d takes `channels` (torchvision's classifiers take 3)."""
    for parent in model.modules():
        for name, child in parent.named_children():
            if isinstance(child, nn.Conv2d):
                if child.in_channels != channels:
                    setattr(parent, name, nn.Conv2d(channels, child.out_channels, child.kernel_size, child.stride, child.padding,
                                                    child.dilation, child.groups, child.bias is not None, child.padding_mode))
                return
    raise ExportError("--in-channels: the model has no Conv2d")


class BlockTracer(fx.Tracer):
    """Records, for every node, the stack of modules it was traced in; the modules in `whole`
    are not traced into (leaves: scripted as they are)."""

    def __init__(self, whole=()):
        super().__init__()
        self.stack = []
        self.whole = set(whole)
        self.by_mode = set()   # kept whole as they read self.training
        self.failed_in = None  # the module stack where tracing last failed

    def is_leaf_module(self, m, qualified_name):
        if qualified_name in self.whole or super().is_leaf_module(m, qualified_name):
            return True
        # A forward that reads self.training (stochastic depth, a dropout of one's own) would be
        # traced with its mode fixed; kept whole, it reads the mode as it runs.
        if qualified_name and reads_training(type(m)):
            self.by_mode.add(qualified_name)
            return True
        return False

    def call_module(self, m, forward, args, kwargs):
        self.stack.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            if self.failed_in is None:
                self.failed_in = list(self.stack)
            raise
        finally:
            self.stack.pop()

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta["stack"] = list(self.stack)
        return node


@functools.lru_cache(maxsize=None)
def reads_training(cls):
    if isinstance(cls, type) and issubclass(cls, CONTAINERS):
        return False
    try:
        return "self.training" in inspect.getsource(cls.forward)
    except (OSError, TypeError):  # no source (built in, or made at run time)
        return False


def trace(model):
    """The model's graph. Where torch.fx cannot trace inside a module (a helper that unpacks
    x.size(), a data-dependent branch), that module becomes a leaf, kept whole in its segment,
    and the trace is tried again: cuts fall between the model's blocks anyway."""
    whole = []
    while True:
        tracer = BlockTracer(whole)
        try:
            return tracer.trace(model), whole, sorted(tracer.by_mode)
        except Exception as e:  # torch.fx's own message says which code it could not trace
            inner = [p for p in (tracer.failed_in or []) if p and p not in whole and
                     not isinstance(model.get_submodule(p), CONTAINERS)]
            if not inner:  # else each try keeps a new class whole: the loop ends
                raise ExportError(f"torch.fx cannot trace the model's own forward, outside the modules it could keep "
                                  f"whole: {one_line(e, sentence=True)}{where_in_model(e)}; move that code into a module "
                                  "of its own, or write it so that it traces (x.new_ones(...), not torch.ones(x.size(0)))")
            # The innermost module where it failed, and every module of its class (same code).
            cls = type(model.get_submodule(inner[-1]))
            whole += [p for p, m in model.named_modules() if type(m) is cls and p not in whole]


def modules_said(model, paths):
    """A few modules by path; many by class and count."""
    if len(paths) <= 4:
        return ", ".join(sorted(paths))
    counts = OrderedDict()
    for p in sorted(paths):
        name = type(model.get_submodule(p)).__name__
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} x{c}" for n, c in counts.items())


def one_line(e, sentence=False):
    text = str(e).strip().split("\n")[0]
    if sentence and ". " in text:
        text = text.split(". ")[0] + "."
    return text if len(text) <= 300 else text[:300] + "..."


def where_in_model(e):
    """The innermost line of the model's code (not PyTorch's, not this file's) an error came from."""
    last, tb = None, e.__traceback__
    while tb:
        f = tb.tb_frame.f_code
        if "/torch/" not in f.co_filename and os.path.abspath(f.co_filename) != os.path.abspath(__file__):
            last = (os.path.basename(f.co_filename), tb.tb_lineno, f.co_name)
        tb = tb.tb_next
    return f" (at {last[0]}:{last[1]}, in {last[2]})" if last else ""


def unit_of(root, node):
    """The outermost module a node belongs to that is not a container, or None (top-level code)."""
    for path in node.meta.get("stack", []):
        if not isinstance(root.get_submodule(path), CONTAINERS):
            return path
    return None


def params_of(root, node):
    """Identities of the parameters and buffers a node reads directly."""
    if node.op == "call_module":
        m = root.get_submodule(node.target)
        return {id(t) for t in list(m.parameters()) + list(m.buffers())}
    if node.op == "get_attr":
        return {id(getattr_path(root, node.target))}
    return set()


def getattr_path(root, target):
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def describe(t):
    return "x".join(str(d) for d in t.shape)


def runs_at(model, leading, size):
    """Whether the model's forward runs on zeros of shape leading + [size, size]."""
    x = torch.zeros(list(leading) + [size, size])
    try:
        with torch.no_grad():
            model.eval()
            model(x)
        return True
    except Exception:
        return False
    finally:
        model.train()


def too_small(model, example, e):
    """Why the model cannot run on the example: for an image (C,H,W), the smallest square size
    it takes, found by trying."""
    why = f"the model cannot run on a sample of {describe(example[0])}: {one_line(e)}"
    if example.dim() != 4:
        return why
    low, high = example.shape[-1], None
    for size in (16, 24, 32, 48, 64, 96, 128, 160, 224, 299, 384, 512):
        if size > low and runs_at(model, example.shape[:-2], size):
            high = size
            break
    if high is None:
        return why + " (nor at any square size up to 512)"
    while high - low > 1:  # it fails at low and runs at high
        mid = (low + high) // 2
        low, high = (low, mid) if runs_at(model, example.shape[:-2], mid) else (mid, high)
    channels = ",".join(str(d) for d in example.shape[1:-2])
    return why + f"; the smallest square input it takes is --input {channels},{high},{high}"


def segments_of(root, gm, example):
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != 1:
        raise ExportError(f"the model's forward takes {len(placeholders)} inputs; dynapar feeds one tensor")
    out_node = next(n for n in graph.nodes if n.op == "output")
    result = out_node.args[0]
    if not isinstance(result, fx.Node):
        raise ExportError("the model's forward returns a tuple or a dict; dynapar needs one tensor of class scores")
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # ShapeProp prints a traceback of its own
            ShapeProp(gm).propagate(example)
    except Exception as e:
        raise ExportError(too_small(root, example, e.__cause__ or e))
    if not isinstance(result.meta.get("tensor_meta"), TensorMetadata):
        raise ExportError(f"the model's forward returns {type(result.meta.get('tensor_meta')).__name__.replace('Metadata', '')} "
                          "in training mode, not one tensor: dynapar trains one tensor of class scores (return the main "
                          "output; torchvision's GoogLeNet and Inception v3 are exported with aux_logits off)")
    # get_attr nodes (a parameter used in code, not through a module) move to just before
    # their first user, so that they are never alive across a cut unless shared.
    body = [n for n in graph.nodes if n.op not in ("placeholder", "output", "get_attr")]
    order = []
    for n in body:
        for a in n.all_input_nodes:
            if a.op == "get_attr" and a not in order:
                order.append(a)
        order.append(n)
    pos = {n: i for i, n in enumerate(order)}
    pos[placeholders[0]] = -1
    last_use = {}
    for n in order:
        for a in n.all_input_nodes:
            last_use[a] = max(last_use.get(a, -1), pos[n])
    last_use[result] = len(order)

    def alive_after(i):  # values defined at or before i and used after it
        return [n for n, p in pos.items() if p <= i and last_use.get(n, -1) > i]

    def cut_ok(i):
        alive = alive_after(i)
        return len(alive) == 1 and isinstance(alive[0].meta.get("tensor_meta"), object) and \
            hasattr(alive[0].meta.get("tensor_meta"), "shape")

    units = [unit_of(root, n) for n in order]
    composite = {u for u in units if u is not None and len(list(root.get_submodule(u).children())) > 0}
    with_params = {u for u in units if u is not None and any(True for _ in root.get_submodule(u).parameters())}
    wanted = []
    for i in range(len(order) - 1):
        a, b = units[i], units[i + 1]
        if a == b:
            continue
        if composite:
            if a in composite or b in composite:
                wanted.append(i)
        elif b in with_params:  # a flat model: each layer with weights starts a segment
            wanted.append(i)
    cuts = [i for i in wanted if cut_ok(i)]
    bounds = [-1] + cuts + [len(order) - 1]
    segs = [order[bounds[k] + 1: bounds[k + 1] + 1] for k in range(len(bounds) - 1)]
    segs = merge_tied(root, segs)
    return segs, order, pos, last_use, result, units


def merge_tied(root, segs):
    """Segments that read the same weight are merged with everything between them."""
    while True:
        owner = {}
        merged = False
        for k, seg in enumerate(segs):
            for n in seg:
                for p in params_of(root, n):
                    if p in owner and owner[p] != k:
                        lo = owner[p]
                        segs = segs[:lo] + [sum(segs[lo:k + 1], [])] + segs[k + 1:]
                        merged = True
                        break
                    owner[p] = k
                if merged:
                    break
            if merged:
                break
        if not merged:
            return segs


def build_segment(root, seg, pos, last_use, contiguous):
    g = fx.Graph()
    inside = set(seg)
    inputs = [n for n in pos if n not in inside and any(u in inside for u in n.users) and n.op != "get_attr"]
    if len(inputs) != 1:
        raise ExportError("internal: a segment with " + str(len(inputs)) + " inputs")
    env = {inputs[0]: g.placeholder("x")}
    for n in seg:
        env[n] = g.node_copy(n, lambda a: env[a])
    outs = [n for n in seg if last_use.get(n, -1) > pos[seg[-1]]]
    g.output(g.call_method("contiguous", (env[outs[0]],)) if contiguous else env[outs[0]])
    return fx.GraphModule(root, g)


def segment_name(root, seg, units, pos, k, count):
    names = []
    for n in seg:
        u = units[pos[n]]
        if u is not None and u not in names:
            names.append(u)
    if len(names) == 1 and len(list(root.get_submodule(names[0]).children())) > 0:
        base = names[0]
    elif k == 0 and count > 1:
        base = "stem"
    elif k == count - 1 and count > 1:
        base = "head"
    elif len(names) > 1:  # a run of plain layers or blocks: its first and last
        base = f"{names[0]}_to_{names[-1]}"
    else:
        base = names[0] if names else f"part{k}"
    return base.replace(".", "_")


def gradients(params, x, run, weights):
    """The input's and each parameter's gradient of (run(x) * weights).sum()."""
    for p in params:
        p.grad = None
    x = x.clone().requires_grad_(True)
    (run(x) * weights).sum().backward()
    # No gradient (an input read as token ids, a parameter unused) is a zero one, as a stage
    # hands back a zero gradient for an input its output does not depend on.
    return [t.grad if t.grad is not None else torch.zeros_like(t) for t in [x] + params]


def run_cut(segments, x):
    """The chain as a pipeline cut at every boundary runs it: each segment's input a leaf of
    its own graph, its gradient taken as autograd summed it (a hook, before the leaf's own
    accumulation) and handed to the previous segment's backward, layout and all."""
    class Cut(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.graphs = []
            y = x
            for seg in segments:
                leaf = y.detach().requires_grad_(y is not x or x.requires_grad)
                got = []
                if leaf.requires_grad:
                    leaf.register_hook(got.append)
                with torch.enable_grad():
                    out = seg(leaf)
                ctx.graphs.append((leaf, out, got))
                y = out.detach()
            return y

        @staticmethod
        def backward(ctx, g):
            for leaf, out, got in reversed(ctx.graphs):
                if out.requires_grad:
                    out.backward(g)
                g = got[0] if got else (torch.zeros_like(leaf) if leaf.requires_grad else None)
            return g
    return Cut.apply(x)


def check_gradients(model, chain, example, seed):
    """The chain's backward must be the model's, bit for bit: in one graph (one device) and cut
    at every boundary (a pipeline), the input's and every parameter's gradient. A chain whose
    gradients differ would train other weights than the model: refused."""
    params = [p for p in model.parameters() if p.requires_grad]
    names = {id(p): n for n, p in model.named_parameters()}
    segments = list(chain.values())
    weights = torch.randn(model(example.clone()).shape, generator=torch.Generator().manual_seed(seed + 1))

    def seeded(f):
        def run(x):
            torch.manual_seed(seed)
            return f(x)
        return run

    want = gradients(params, example, seeded(model), weights)
    for how, run in (("in one graph", seeded(lambda x: functools.reduce(lambda y, s: s(y), segments, x))),
                     ("cut at every boundary", seeded(lambda x: run_cut(segments, x)))):
        got = gradients(params, example, run, weights)
        for i, (a, b) in enumerate(zip(want, got)):
            what = "the input's gradient" if i == 0 else f"the gradient of '{names.get(id(params[i - 1]), '?')}'"
            if not torch.equal(a, b):
                raise ExportError(f"the chain's backward {how} differs from the model's: {what}")
    for p in params:
        p.grad = None


def make_chain(model, segs, pos, last_use, units, example, seed, contiguous):
    """The segments scripted into a chain, checked against the model's own forward (training
    and evaluation mode) and backward; ExportError where they differ."""
    chain = OrderedDict()
    rows = []
    for k, seg in enumerate(segs):
        name = segment_name(model, seg, units, pos, k, len(segs))
        while name in chain:
            name += "_"
        part = build_segment(model, seg, pos, last_use, contiguous)
        try:
            scripted = torch.jit.script(part)
        except Exception as e:
            raise ExportError(f"segment {name}: TorchScript cannot compile it: {one_line(e)}")
        chain[name] = scripted
        params = sum(p.numel() for p in part.parameters())
        out_meta = seg[-1].meta.get("tensor_meta") if seg else None
        for n in reversed(seg):
            if last_use.get(n, -1) > pos[seg[-1]]:
                out_meta = n.meta.get("tensor_meta")
                break
        rows.append((name, params, describe(out_meta) if out_meta is not None else "?"))
    top = torch.jit.script(nn.Sequential(chain))
    # The checks run the model: its running statistics (BatchNorm's) go back as they were.
    kept = {k: v.detach().clone() for k, v in model.state_dict().items()}
    # dynapar runs TorchScript unoptimised (runtime/model/scripted.cpp): so do the checks.
    torch._C._set_graph_executor_optimize(False)
    try:
        # The chain must compute the model's forward: the same bits in training mode (dropout
        # drawn in the same order) and in evaluation mode.
        worst = 0.0
        for training in (True, False):
            model.train(training)
            top.train(training)
            torch.manual_seed(seed)
            want = model(example.clone())
            torch.manual_seed(seed)
            got = top(example.clone())
            if got.shape != want.shape:
                raise ExportError(f"the chain gives {tuple(got.shape)}, the model {tuple(want.shape)}")
            if not torch.equal(got, want):
                worst = max(worst, ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item())
        model.train()  # the backward is checked in training mode
        top.train()
        if worst > 1e-6:
            raise ExportError(f"the chain differs from the model's forward (largest relative difference {worst:.3g})")
        if worst == 0:
            check_gradients(model, chain, example, seed)
    finally:
        model.train()
        with torch.no_grad():
            for k, v in model.state_dict().items():
                v.copy_(kept[k])
    return chain, top, rows, worst, want


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a torchvision model name, FILE.py:FUNCTION or module:FUNCTION")
    ap.add_argument("--input", required=True, help="one sample's shape, e.g. 1,28,28")
    ap.add_argument("--kwargs", default="{}", help="JSON keyword arguments for the model's constructor")
    ap.add_argument("--in-channels", type=int, help="give the first Conv2d this many input channels")
    ap.add_argument("--vocab", type=int, default=0,
                    help="the samples are token ids below this (fed as floats: call .long() in the model), e.g. --input 1,1,64")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed before the model is built (its initial weights)")
    ap.add_argument("--out", required=True, help="the TorchScript file to write (.pt)")
    ap.add_argument("--debug", action="store_true", help="on a failure, Python's traceback instead of one line")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", module="torch.jit")  # TorchScript's notes on torchvision's code
    warnings.filterwarnings("ignore", category=FutureWarning, module="torchvision")  # its notes on future defaults
    try:
        shape = [int(s) for s in args.input.split(",")]
        if not shape or any(s <= 0 for s in shape):
            raise ValueError
    except ValueError:
        raise ExportError(f"--input '{args.input}': give a sample's shape as positive integers, e.g. 1,28,28")
    if not args.out.endswith(".pt"):
        raise ExportError("--out: dynapar recognises a model file by its .pt ending")
    torch.manual_seed(args.seed)
    try:
        kwargs = json.loads(args.kwargs)
    except ValueError as e:
        raise ExportError(f"--kwargs '{args.kwargs}': not a JSON object ({e})")
    if not isinstance(kwargs, dict):
        raise ExportError(f"--kwargs '{args.kwargs}': give a JSON object, e.g. '{{\"num_classes\": 10}}'")
    model = load_model(args.model, kwargs, args.seed)
    if args.in_channels:
        set_in_channels(model, args.in_channels)
    # In-place activations would write into a stage's input, which autograd forbids on a
    # leaf: out of place they compute the same values.
    for m in model.modules():
        if hasattr(m, "inplace") and isinstance(m.inplace, bool):
            m.inplace = False
    model.train()
    graph, whole, by_mode = trace(model)
    if whole:
        print("kept whole (torch.fx cannot trace inside; scripted as they are): " + modules_said(model, whole))
    if by_mode:
        print("kept whole (they read the training mode as they run): " + modules_said(model, by_mode))
    gm = fx.GraphModule(model, graph)
    gen = torch.Generator().manual_seed(args.seed)
    if args.vocab < 0:
        raise ExportError("--vocab must be > 0 (token ids) or left out (values)")
    example = (torch.randint(0, args.vocab, [2] + shape, generator=gen).float() if args.vocab
               else torch.randn([2] + shape, generator=gen))
    segs, order, pos, last_use, result, units = segments_of(model, gm, example)
    # What crosses a cut is made contiguous where that keeps the model's bits; where the
    # model's own backward depends on a view's layout (a permute before a LayerNorm, as in
    # ConvNeXt), the view crosses as it is (the runtime hands it on with its strides).
    try:
        chain, top, rows, worst, want = make_chain(model, segs, pos, last_use, units, example, args.seed, True)
    except ExportError:
        chain, top, rows, worst, want = make_chain(model, segs, pos, last_use, units, example, args.seed, False)
        print("views cross the cuts as they are (made contiguous, the chain's backward differed from the model's)")
    # Class scores [batch, classes], or a language model's [batch, positions, vocab] (a score
    # for every position's next token: loss next_token).
    if want.dim() != 2 and not (want.dim() == 3 and args.vocab > 0):
        raise ExportError(f"the model gives {tuple(want.shape)} per batch; dynapar trains class scores [batch, classes]"
                          " (or, with --vocab, next-token scores [batch, positions, vocab])")
    meta = {"format": "dynapar-chain", "version": 1, "source": args.model, "input": shape, "classes": int(want.shape[-1]),
            "positions": int(want.shape[1]) if want.dim() == 3 else 0, "vocab": args.vocab,
            "segments": [{"name": n, "parameters": p, "output": o} for n, p, o in rows]}
    torch.jit.save(top, args.out, _extra_files={"dynapar.json": json.dumps(meta)})
    total = sum(p for _, p, _ in rows)
    print(f"{args.model}: {len(rows)} segments, {total} parameters, input {args.input}, {want.shape[-1]} classes{f' at each of {want.shape[1]} positions' if want.dim() == 3 else ''} -> {args.out}")
    print(f"  {'segment':<14} {'parameters':>12}  output (a sample batch of 2)")
    for n, p, o in rows:
        print(f"  {n:<14} {p:>12}  {o}")
    print("  chain == model forward: " + ("bit-identical" if worst == 0 else f"largest relative difference {worst:.3g}"))
    return 0


if __name__ == "__main__":
    debug = "--debug" in sys.argv[1:]
    try:
        sys.exit(main())
    except ExportError as e:
        if debug:
            raise
        print(f"dynapar_export: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # the model's own code, or PyTorch's: one line, where it came from
        if debug:
            raise
        tb = e.__traceback__
        while tb.tb_next:
            tb = tb.tb_next
        where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        print(f"dynapar_export: {type(e).__name__}: {one_line(e)} (at {where}; --debug shows the traceback)", file=sys.stderr)
        sys.exit(2)
