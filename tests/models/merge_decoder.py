#!/usr/bin/env python3
"""Merges a decoder without past and one with past into one model under an `If`, as Optimum does.

    /usr/bin/python3 tests/models/merge_decoder.py DECODER.onnx DECODER_WITH_PAST.onnx OUT.onnx

This is the layout of Optimum's `decoder_model_merged.onnx` (optimum.onnx.merge_decoders), built
with onnx.helper in the same steps:

1. Both models must have the same opset and the same outputs, in the same order, with the same
   names and element types (logits, present.{i}.key, present.{i}.value). The no-past model's
   output value infos are replaced by the with-past model's, so both branches declare identical
   outputs; their dim names are the with-past ones (the present length is
   "past_sequence_length + 1" in both branches, though the no-past branch produces
   sequence_length rows: a declared symbolic dim of a subgraph output is not a promise).
2. The merged graph's inputs are the union of both models' inputs in order (input_ids from the
   no-past model, then past_key_values.{i}.{key,value} from the with-past one), plus
   `use_cache_branch`, BOOL of shape [1].
3. Initializers are deduplicated across the two models by (data type, dims, bytes): each group of
   equal tensors gets one name, every node input naming a member is renamed, and one copy goes to
   the merged (outer) graph, where both branches read it from the enclosing scope. The shared
   name is a member's name plus "_merged" (Optimum takes any member; here the first, so that
   the output is deterministic). Two different tensors that carry the
   same name in the two exports (torch numbers its values per export) are told apart first, by
   renaming the with-past one with a "_with_past" suffix, so that no branch reads a wrong weight.
4. As Optimum does, scalar initializers and 1-D int32/int64 ones (shape constants) are also
   copied into the branch whose model had them: a branch then holds local initializers with the
   same names as outer ones, which shadow them. Importers have to handle subgraph initializers.
   (torch 1.13 writes such small constants as Constant nodes, so the committed merged decoder's
   branches have none; exports from other exporters do.)
5. The branches are the two models' node lists as graphs without inputs: then_branch = the
   with-past graph (named "with_past"), else_branch = the no-past graph ("no_past"); each reads
   input_ids, the past tensors and the weights from the outer scope.
6. One node, If(use_cache_branch) named "optimum::if", whose outputs carry the unified output
   names; the merged graph's outputs are those value infos. Opset imports are the union of both
   models'. onnx.checker.check_model must accept the result.

Run it with use_cache_branch = [False] and past tensors of length 0 for the first step (the
no-past branch ignores them), then [True] with the previous step's present.* as past.
"""
import argparse
import copy
import sys
from collections import OrderedDict

import onnx
from onnx import TensorProto, helper

SUFFIX = "merged"


def _tensor_key(t):
    """(data type, dims, content) of an initializer; equal keys are the same tensor."""
    for attr in ("raw_data", "float_data", "int32_data", "int64_data", "uint64_data", "double_data"):
        data = getattr(t, attr)
        if data:
            return (t.data_type, tuple(t.dims), attr, bytes(data) if attr == "raw_data" else tuple(data))
    return (t.data_type, tuple(t.dims), "empty", ())


def _rename_inputs(graph, mapping):
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in mapping:
                node.input[i] = mapping[name]
        for attr in node.attribute:  # nested graphs read outer names too
            if attr.type == onnx.AttributeProto.GRAPH:
                _rename_inputs(attr.g, mapping)
            for g in attr.graphs:
                _rename_inputs(g, mapping)


def _unify_outputs(decoder, with_past):
    a, b = decoder.graph.output, with_past.graph.output
    if len(a) != len(b):
        raise ValueError(f"the decoder has {len(a)} outputs, the decoder with past {len(b)}")
    for x, y in zip(a, b):
        if x.name != y.name or x.type.tensor_type.elem_type != y.type.tensor_type.elem_type:
            raise ValueError(f"output {x.name} does not match {y.name} (names and types must match, in order)")
    del decoder.graph.output[:]
    decoder.graph.output.extend(copy.deepcopy(list(b)))


def _deduplicate(decoder, with_past):
    """Renames initializers so equal tensors share one name; returns the outer list."""
    first_names = {t.name: _tensor_key(t) for t in decoder.graph.initializer}
    clash = {t.name: f"{t.name}_with_past" for t in with_past.graph.initializer
             if t.name in first_names and first_names[t.name] != _tensor_key(t)}
    for t in with_past.graph.initializer:
        t.name = clash.get(t.name, t.name)
    _rename_inputs(with_past.graph, clash)

    groups = OrderedDict()  # key -> shared name
    for t in list(decoder.graph.initializer) + list(with_past.graph.initializer):
        groups.setdefault(_tensor_key(t), f"{t.name}_{SUFFIX}")
    outer, taken = [], set()
    for model in (decoder, with_past):
        mapping = {t.name: groups[_tensor_key(t)] for t in model.graph.initializer}
        _rename_inputs(model.graph, mapping)
        for t in model.graph.initializer:
            shared = groups[_tensor_key(t)]
            if shared not in taken:
                taken.add(shared)
                o = copy.deepcopy(t)
                o.name = shared
                outer.append(o)
            t.name = shared
    return outer


def _branch_locals(model):
    """Optimum's rule: scalars and 1-D int32/int64 initializers stay inside the branch too."""
    return [copy.deepcopy(t) for t in model.graph.initializer
            if len(t.dims) == 0 or (len(t.dims) == 1 and t.data_type in (TensorProto.INT32, TensorProto.INT64))]


def _check_no_shadowing(branch, outer_names):
    produced = {o for n in branch.node for o in n.output}
    bad = sorted(produced & outer_names)
    if bad:
        raise ValueError(f"branch {branch.name} computes values named like outer ones: {bad[:5]}")


def merge(decoder, with_past):
    decoder, with_past = copy.deepcopy(decoder), copy.deepcopy(with_past)
    op_a = {o.domain: o.version for o in decoder.opset_import}
    op_b = {o.domain: o.version for o in with_past.opset_import}
    if op_a.get("", None) != op_b.get("", None):
        raise ValueError(f"opsets differ: {op_a} vs {op_b}")
    _unify_outputs(decoder, with_past)

    inputs, seen = [], set()
    for model in (decoder, with_past):
        for i in model.graph.input:
            if i.name not in seen:
                seen.add(i.name)
                inputs.append(copy.deepcopy(i))
    use_cache = helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])

    outer = _deduplicate(decoder, with_past)
    no_past = helper.make_graph(list(decoder.graph.node), "no_past", inputs=[],
                                outputs=list(decoder.graph.output),
                                initializer=_branch_locals(decoder))
    past = helper.make_graph(list(with_past.graph.node), "with_past", inputs=[],
                             outputs=list(with_past.graph.output),
                             initializer=_branch_locals(with_past))
    outer_names = {i.name for i in inputs} | {t.name for t in outer} | {"use_cache_branch"}
    for branch in (no_past, past):
        _check_no_shadowing(branch, outer_names)

    if_node = helper.make_node("If", inputs=["use_cache_branch"],
                               outputs=[o.name for o in no_past.output], name="optimum::if",
                               then_branch=past, else_branch=no_past)
    graph = helper.make_graph([if_node], SUFFIX, inputs=inputs + [use_cache],
                              outputs=copy.deepcopy(list(no_past.output)), initializer=outer)
    opsets, domains = [], set()
    for o in list(decoder.opset_import) + list(with_past.opset_import):
        if o.domain not in domains:
            domains.add(o.domain)
            opsets.append(o)
    merged = helper.make_model(graph, producer_name="ubfuse-merge-decoder", opset_imports=opsets)
    merged.ir_version = decoder.ir_version
    onnx.checker.check_model(merged)
    return merged


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("decoder")
    ap.add_argument("decoder_with_past")
    ap.add_argument("out")
    a = ap.parse_args()
    merged = merge(onnx.load(a.decoder), onnx.load(a.decoder_with_past))
    onnx.save(merged, a.out)
    print(f"{a.out}: {len(merged.graph.initializer)} shared initializers, "
          f"inputs {[i.name for i in merged.graph.input]}", file=sys.stderr)


if __name__ == "__main__":
    main()
