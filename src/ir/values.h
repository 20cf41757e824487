// Value operands: inputs whose contents, not only their sizes, decide an op's output shape (a
// Reshape's target, Slice bounds, a Range's limit). Shape inference reads them where they are
// known: at compile time from a Constant producer or from the value's known dims
// (Value::known); while a plan is built, the plan hands in the values it computed as constants
// (plan/plan.cc). A dim that is not known yet is a run-time symbol, which the plan binds.
#pragma once

#include <optional>
#include <vector>

#include "ubfuse/graph.h"

namespace ubfuse {

// Whether input i of n is a value operand: its contents, not only its sizes, decide the output's
// shape. Exhaustive over ops.def, so a new op states which of its inputs are.
bool is_value_operand(const Node& n, int i);

// The contents of input i of n when a Constant produces it, else null.
const Tensor* operand_value(const Node& n, int i);
// Its elements as int64 (integer dtypes, or float ones holding integers), when known.
std::optional<std::vector<int64_t>> operand_ints(const Node& n, int i);
// Its elements as int64 from a constant or from known dims that are all static, when known.
std::optional<std::vector<int64_t>> operand_static_ints(const Node& n, int i);
// Its elements as dims: the constant's values or the value's known dims, when known.
std::optional<std::vector<Dim>> operand_dims(const Node& n, int i);
// Sets v's known dims from a constant payload (small integer tensors of rank 0 or 1).
void set_known_from_constant(Value& v, const Tensor& t);

// A dim only the plan can know: dim d of output `out` of n. Its symbol starts with '$'.
Dim runtime_dim(const Node& n, int out, int d);
bool is_runtime_symbol(const std::string& s);

}  // namespace ubfuse
