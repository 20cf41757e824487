"""kv_decoder in the form onnxruntime-genai's model builder saves a LLaMA-style decoder (the Phi,
Llama, Mistral and Qwen models it runs): input_ids, attention_mask [batch, past + sequence] and
past_key_values.{i}.{key,value} in, logits and present.{i}.{key,value} out; the norms
SimplifiedLayerNormalization and com.microsoft SkipSimplifiedLayerNormalization (the residual add
inside); each layer's attention one com.microsoft GroupQueryAttention node with do_rotary (the
rotary cos/sin caches as constants, rotate_half), seqlens_k and total_sequence_length computed
from attention_mask as the builder does (ReduceSum - 1, Shape[1], cast to int32); SiLU as
x * Sigmoid(x). The builder itself is onnxruntime-genai's Python package (PyPI), so the same graph
is written here from the exported decoder's weights.

    genai_decoder(src_onnx, dst_onnx, heads, kv_heads, positions)

src_onnx is kv_decoder_with_past.onnx; positions is the cos/sin caches' row count (the longest
sequence the model takes).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def genai_decoder(src, dst, heads, kv_heads, positions):
    m = onnx.load(src)
    g = m.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    # The projections in graph order: per layer q, k, v, o, gate, up, down; then lm_head. The gate
    # is the product SiLU reads (Sigmoid).
    products = [n for n in g.node if n.op_type == "MatMul" and n.input[1] in inits]
    layers = sum(1 for name in inits if name.endswith(".input_norm.weight"))
    if len(products) != 7 * layers + 1:
        raise SystemExit(f"ort_genai: {len(products)} constant MatMuls for {layers} layers")
    hidden = inits["embed.weight"].shape[1]
    d = hidden // heads

    new_inits, nodes = [], []

    def const(name, a):
        new_inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def node(op, ins, outs, **kw):
        nodes.append(helper.make_node(op, ins, outs, **kw))
        return outs[0]

    # rotate_half's cos and sin per position: cos(p * inv_freq) for the d / 2 frequencies.
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, d, 2, dtype=np.float32) / d))
    angles = np.outer(np.arange(positions, dtype=np.float32), inv_freq)
    cos = const("cos_cache", np.cos(angles).astype(np.float32))
    sin = const("sin_cache", np.sin(angles).astype(np.float32))
    one = const("one", np.array(1, dtype=np.int64))
    axis1 = const("axis1", np.array([1], dtype=np.int64))
    node("ReduceSum", ["attention_mask", axis1], ["mask_sum"], keepdims=0)
    node("Sub", ["mask_sum", one], ["seqlens_k_64"])
    node("Cast", ["seqlens_k_64"], ["seqlens_k"], to=TensorProto.INT32)
    node("Shape", ["attention_mask"], ["mask_shape"])
    node("Gather", ["mask_shape", one], ["total_64"], axis=0)
    node("Cast", ["total_64"], ["total_sequence_length"], to=TensorProto.INT32)
    x = node("Gather", [const("embed.weight", inits["embed.weight"]), "input_ids"], ["embedded"])
    residual, eps = None, 1e-6

    def norm(x, residual, weight, name):
        """(normalized, residual sum): the first norm alone, the others with the residual add."""
        w = const(weight, inits[weight])
        if residual is None:
            return node("SimplifiedLayerNormalization", [x, w], [f"{name}.out"], axis=-1,
                        epsilon=eps), x
        outs = [f"{name}.out", "", "", f"{name}.sum"]
        nodes.append(helper.make_node("SkipSimplifiedLayerNormalization", [x, residual, w], outs,
                                      domain="com.microsoft", epsilon=eps))
        return outs[0], outs[3]

    for i in range(layers):
        q, k, v, o, p1, p2, down = products[7 * i:7 * i + 7]
        gate, up = (p1, p2) if any(r.op_type == "Sigmoid" for r in readers[p1.output[0]]) else (p2, p1)

        def weight(p, what):
            return const(f"layers.{i}.{what}.weight", inits[p.input[1]])

        h, residual = norm(x, residual, f"layers.{i}.input_norm.weight", f"layers.{i}.input_norm")
        qkv = [node("MatMul", [h, weight(p, w)], [f"layers.{i}.{w}"])
               for p, w in ((q, "q_proj"), (k, "k_proj"), (v, "v_proj"))]
        node("GroupQueryAttention",
             qkv + [f"past_key_values.{i}.key", f"past_key_values.{i}.value", "seqlens_k",
                    "total_sequence_length", cos, sin],
             [f"layers.{i}.attn", f"present.{i}.key", f"present.{i}.value"],
             domain="com.microsoft", num_heads=heads, kv_num_heads=kv_heads, do_rotary=1,
             rotary_interleaved=0, local_window_size=-1)
        x = node("MatMul", [f"layers.{i}.attn", weight(o, "o_proj")], [f"layers.{i}.o_proj"])
        h, residual = norm(x, residual, f"layers.{i}.post_norm.weight", f"layers.{i}.post_norm")
        g_ = node("MatMul", [h, weight(gate, "gate_proj")], [f"layers.{i}.gate"])
        silu = node("Mul", [g_, node("Sigmoid", [g_], [f"layers.{i}.gate_sigmoid"])],
                    [f"layers.{i}.silu"])
        u = node("MatMul", [h, weight(up, "up_proj")], [f"layers.{i}.up"])
        x = node("MatMul", [node("Mul", [silu, u], [f"layers.{i}.act"]), weight(down, "down_proj")],
                 [f"layers.{i}.down"])
    h, _ = norm(x, residual, "norm.weight", "final_norm")
    node("MatMul", [h, const("lm_head.weight", inits[products[-1].input[1]])], ["logits"])

    kv_shape = ["batch_size", kv_heads, "past_sequence_length", d]
    present_shape = ["batch_size", kv_heads, "total_sequence_length", d]
    ins = [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                         ["batch_size", "sequence_length"]),
           helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                         ["batch_size", "total_sequence_length"])]
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                          ["batch_size", "sequence_length",
                                           inits["embed.weight"].shape[0]])]
    for i in range(layers):
        for t in ("key", "value"):
            ins.append(helper.make_tensor_value_info(f"past_key_values.{i}.{t}", TensorProto.FLOAT,
                                                     kv_shape))
            outs.append(helper.make_tensor_value_info(f"present.{i}.{t}", TensorProto.FLOAT,
                                                      present_shape))
    graph = helper.make_graph(nodes, "kv_decoder_ortgenai", ins, outs, new_inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="ubfuse tests/models/ort_genai.py")
    model.ir_version = m.ir_version  # onnx's checker knows no SimplifiedLayerNormalization
    onnx.save(model, dst)
