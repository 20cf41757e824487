"""bert_stack in the form onnxruntime's transformer optimizer (and Hugging Face Optimum's
ORTOptimizer) saves a BERT: the embeddings and their LayerNorm one EmbedLayerNormalization, each
layer's attention one Attention node (Q, K and V weights side by side, the mask as key lengths
from EmbedLayerNormalization's mask_index), the residual LayerNorms SkipLayerNormalization with the
projection's bias, the MLP's GELU BiasGelu; int64 ids and mask cast to int32 as the optimizer
does. onnxruntime's own C++ optimizer does not fuse these (it needs the Python one, which PyPI
would bring), so the same rewrite is done here from the exported model's weights.

    fuse_bert(src_onnx, dst_onnx, heads)

The mask as key lengths assumes padding at the end, which the references' inputs have; a padded
key then adds -10000 to its score where the original adds float's minimum: both give it weight 0.
"""
import numpy as np
import onnx
from onnx import numpy_helper
from onnx import TensorProto, helper


def fuse_bert(src, dst, heads):
    m = onnx.load(src)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    by_name = {n.name: n for n in g.node}

    def weight(node_name):  # a MatMul's constant B
        return inits[by_name[node_name].input[1]]

    def bias_of(add_name):  # an Add's constant operand
        return inits[next(i for i in by_name[add_name].input if i in inits)]

    def arr(t):
        return numpy_helper.to_array(t)

    new_inits, nodes = [], []

    def const(name, a):
        new_inits.append(numpy_helper.from_array(a, name))
        return name

    layers = sorted({n.name.split("/")[1] for n in g.node if n.name.startswith("/layers.")},
                    key=lambda s: int(s.split(".")[1]))
    nodes.append(helper.make_node("Cast", ["input_ids"], ["ids32"], to=TensorProto.INT32))
    nodes.append(helper.make_node("Cast", ["attention_mask"], ["mask32"], to=TensorProto.INT32))
    word = const("word.weight", arr(inits["word.weight"]))
    pos = const("position.weight", arr(inits["position.weight"]))
    gamma = const("emb_norm.weight", arr(inits["emb_norm.weight"]))
    beta = const("emb_norm.bias", arr(inits["emb_norm.bias"]))
    nodes.append(helper.make_node("EmbedLayerNormalization",
                                  ["ids32", "", word, pos, "", gamma, beta, "mask32"],
                                  ["emb", "mask_index"], domain="com.microsoft", epsilon=1e-12))
    x = "emb"
    for layer in layers:
        p = f"/{layer}"
        w = np.concatenate([arr(weight(f"{p}/{k}/MatMul")) for k in ("query", "key", "value")], 1)
        b = np.concatenate([arr(bias_of(f"{p}/{k}/Add")) for k in ("query", "key", "value")])
        att = f"{layer}.attention"
        nodes.append(helper.make_node("Attention", [x, const(f"{att}.qkv_weight", w),
                                                    const(f"{att}.qkv_bias", b), "mask_index"],
                                      [f"{att}.out"], domain="com.microsoft", num_heads=heads))
        o = const(f"{layer}.attn_out.weight", arr(weight(f"{p}/attn_out/MatMul")))
        nodes.append(helper.make_node("MatMul", [f"{att}.out", o], [f"{layer}.proj"]))
        norm1 = f"{layer}.attn_norm"
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [f"{layer}.proj", x, const(f"{norm1}.weight", arr(inits[f"{layer}.attn_norm.weight"])),
             const(f"{norm1}.bias", arr(inits[f"{layer}.attn_norm.bias"])),
             const(f"{layer}.attn_out.bias", arr(bias_of(f"{p}/attn_out/Add")))],
            [f"{norm1}.out"], domain="com.microsoft", epsilon=1e-12))
        i = const(f"{layer}.intermediate.weight", arr(weight(f"{p}/intermediate/MatMul")))
        nodes.append(helper.make_node("MatMul", [f"{norm1}.out", i], [f"{layer}.inter"]))
        nodes.append(helper.make_node(
            "BiasGelu", [f"{layer}.inter", const(f"{layer}.intermediate.bias",
                                                arr(bias_of(f"{p}/intermediate/Add")))],
            [f"{layer}.gelu"], domain="com.microsoft"))
        out_w = const(f"{layer}.output.weight", arr(weight(f"{p}/output/MatMul")))
        nodes.append(helper.make_node("MatMul", [f"{layer}.gelu", out_w], [f"{layer}.down"]))
        norm2 = f"{layer}.out_norm"
        y = "last_hidden_state" if layer == layers[-1] else f"{norm2}.out"
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [f"{layer}.down", f"{norm1}.out",
             const(f"{norm2}.weight", arr(inits[f"{layer}.out_norm.weight"])),
             const(f"{norm2}.bias", arr(inits[f"{layer}.out_norm.bias"])),
             const(f"{layer}.output.bias", arr(bias_of(f"{p}/output/Add")))],
            [y], domain="com.microsoft", epsilon=1e-12))
        x = y
    graph = helper.make_graph(nodes, "bert_stack_ortfused", list(g.input), list(g.output),
                              new_inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="ubfuse tests/models/ort_fused.py")
    model.ir_version = m.ir_version
    onnx.checker.check_model(model)
    onnx.save(model, dst)
