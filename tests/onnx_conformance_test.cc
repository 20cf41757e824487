// ONNX backend tests (Debian's libonnx-testdata: per test a model.onnx and
// test_data_set_N/{input,output}_K.pb) through import, compile and run, in eager and graph mode:
// the node tests and the small models of data/pytorch-converted, pytorch-operator and simple.
// A test whose model uses an op, attribute or dtype ubfuse does not support is skipped and counted;
// any supported test that mismatches fails. Test data that stores bfloat16 as UINT16 bit patterns
// is read as bfloat16 where the model declares BFLOAT16.
//
//   UBFUSE_ONNX_TESTDATA=dir     run the test folders in dir instead (default: Debian's
//                                data/node, data/pytorch-converted, ...: kTestSets)
//   UBFUSE_ONNX_FILTER=substr    run only tests whose name contains substr
//   UBFUSE_ONNX_CODEGEN=cpp      graph mode with generated C++ (default: the tile interpreter,
//                                which keeps the run fast; tests/ covers codegen elsewhere)
//   UBFUSE_WRITE_ONNX_DOC=path   write docs/onnx.md (supported ops, per-op pass/skip counts)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "onnx_doc.h"
#include "onnx_one_node.h"  // ONNX's protobuf classes, as the importer defines them
#include "ubfuse/onnx.h"
#include "ubfuse/ubfuse.h"

namespace ubfuse {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name, const std::string& dflt = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

enum class Status { Pass, Skip, Fail };

struct Record {
  std::string test;
  std::vector<std::string> ops;
  Status status = Status::Pass;
  std::string reason;
};

// ONNX's backend tests use rtol 1e-3, atol 1e-7; ubfuse's vectorized exp/erf/tanh get a little
// more absolute room, and 16-bit floats their own precision.
bool close(double got, double want, DType t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!is_float(t)) return got == want;
  double rtol = t == DType::f32 ? 1e-3 : t == DType::f16 ? 4e-3 : 3e-2;
  double atol = t == DType::f32 ? 1e-5 : rtol;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

std::string compare(const Tensor& got, const Tensor& want, const std::string& name) {
  if (got.sizes() != want.sizes()) {
    return "output '" + name + "': shape " + sizes_str(got.sizes()) + ", expected " +
           sizes_str(want.sizes());
  }
  if (got.dtype() != want.dtype()) {
    return "output '" + name + "': dtype " + std::string(dtype_name(got.dtype())) + ", expected " +
           std::string(dtype_name(want.dtype()));
  }
  for (int64_t i = 0; i < got.numel(); i++) {
    if (!close(got.get(i), want.get(i), got.dtype())) {
      return "output '" + name + "' element " + std::to_string(i) + ": got " +
             std::to_string(got.get(i)) + ", expected " + std::to_string(want.get(i));
    }
  }
  return "";
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int k = 0;; k++) {
    fs::path p = dir / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

// ONNX's older backend test data stores bfloat16 tensors as UINT16 bit patterns (numpy has no
// bfloat16): such a file is read as bf16 where the model declares BFLOAT16.
Tensor load_test_tensor(const fs::path& p, DType declared) {
  if (declared == DType::bf16) {
    onnx::TensorProto t;
    std::ifstream f(p, std::ios::binary);
    if (!t.ParseFromIstream(&f)) throw Error("cannot parse '" + p.string() + "'");
    if (t.data_type() == onnx::TensorProto::UINT16) {
      Tensor out(DType::bf16, Sizes(t.dims().begin(), t.dims().end()));
      const std::string& raw = t.raw_data();
      if (raw.size() != size_t(out.numel()) * 2) {
        throw Error("'" + p.string() + "': " + std::to_string(raw.size()) +
                    " bytes of raw_data for " + std::to_string(out.numel()) + " uint16 values");
      }
      std::memcpy(out.data_as<uint16_t>(), raw.data(), raw.size());
      return out;
    }
  }
  return load_onnx_tensor(p.string());
}

// The folders of libonnx-testdata's data/ that hold tests: ONNX's node tests, then models
// PyTorch exported (opset 6: broadcast attributes, is_test) and small whole models.
constexpr const char* kTestSets[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

// Runs one test directory; returns its record, named "set/test" outside the node tests.
Record run_test(const fs::path& dir, const std::string& set, const Options& eager,
                const Options& graph) {
  Record r;
  r.test = (set == "node" || set.empty() ? "" : set + "/") + dir.filename().string();
  fs::path model = dir / "model.onnx";
  try {
    r.ops = onnx_model_op_types(model.string());
  } catch (const Error& e) {
    r.status = Status::Fail;
    r.reason = e.what();
    return r;
  }
  try {
    std::vector<fs::path> sets;
    for (auto& e : fs::directory_iterator(dir)) {
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
        sets.push_back(e.path());
      }
    }
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) throw OnnxUnsupportedError("no test_data_set_* folders");
    // Every input is fed at run time as the test data gives it: shapes, axes, bounds and pads
    // included (they are shape values, read when the plan for a run is built).
    Graph g = import_onnx(model.string());
    CompiledModel modes[2] = {compile(g, eager), compile(g, graph)};
    const char* mode_names[2] = {"eager", "graph"};
    for (auto& set : sets) {
      std::map<std::string, Tensor> inputs;
      auto in_files = numbered(set, "input_");
      auto infos = onnx_model_inputs(model.string());
      if (in_files.size() != infos.size()) {
        throw OnnxUnsupportedError(std::to_string(in_files.size()) + " input files for " +
                                   std::to_string(infos.size()) +
                                   " graph inputs (optional inputs are not supported)");
      }
      for (size_t k = 0; k < in_files.size(); k++) {
        bool live = std::any_of(g.inputs().begin(), g.inputs().end(),
                                [&](const Value* v) { return v->name == infos[k].name; });
        if (!live) continue;
        Tensor t = load_test_tensor(in_files[k], infos[k].dtype);
        // Some test data contradicts its own model (castlike's bfloat16 tests feed 'like' as [1]
        // where the model declares [3,4]); ubfuse rejects such an input, so the test is skipped.
        const Shape& decl = infos[k].shape;
        bool contradicts = decl.size() != size_t(t.rank());
        for (size_t d = 0; !contradicts && d < decl.size(); d++) {
          contradicts = decl[d].is_static() && decl[d].value() != t.dim(int(d));
        }
        if (contradicts) {
          throw OnnxUnsupportedError("the test data's input '" + infos[k].name + "' " +
                                     sizes_str(t.sizes()) + " contradicts the model's " +
                                     shape_str(decl));
        }
        inputs[infos[k].name] = std::move(t);
      }
      auto out_files = numbered(set, "output_");
      std::vector<Tensor> want;
      if (out_files.size() != g.outputs().size()) {
        throw Error(std::to_string(out_files.size()) + " output files for " +
                    std::to_string(g.outputs().size()) + " graph outputs");
      }
      for (size_t k = 0; k < out_files.size(); k++) {
        want.push_back(load_test_tensor(out_files[k], g.outputs()[k].second->dtype));
      }
      for (int m = 0; m < 2; m++) {
        auto got = modes[m].run(inputs);
        for (size_t k = 0; k < want.size(); k++) {
          const std::string& name = g.outputs()[k].first;
          std::string diff = compare(got.at(name), want[k], name);
          if (!diff.empty()) {
            r.status = Status::Fail;
            r.reason =
                std::string(mode_names[m]) + " mode, " + set.filename().string() + ": " + diff;
            return r;
          }
        }
      }
    }
  } catch (const OnnxUnsupportedError& e) {
    r.status = Status::Skip;
    r.reason = e.what();
  } catch (const Error& e) {
    r.status = Status::Fail;
    r.reason = e.what();
  }
  return r;
}

// The part of a skip reason after the model path prefix, short enough for a table.
std::string short_reason(std::string s) {
  auto p = s.find("model.onnx': ");
  if (p != std::string::npos) s = s.substr(p + 13);
  auto list = s.find("; supported ops:");
  if (list != std::string::npos) s = s.substr(0, list);
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  for (char& ch : s) {
    if (ch == '|' || ch == '\n') ch = ' ';
  }
  return s;
}

void write_doc(const std::string& path, const std::vector<Record>& records) {
  std::map<std::string, std::array<int, 3>> per_op;
  std::set<std::string> supported;
  for (auto& op : onnx_supported_ops()) supported.insert(op);
  for (auto& r : records) {
    for (auto& op : r.ops) per_op[op][int(r.status)]++;
  }
  int totals[3] = {0, 0, 0};
  for (auto& r : records) totals[int(r.status)]++;
  std::ofstream f(path);
  f << "# ONNX support\n\n"
    << "<!-- Generated by tests/onnx_conformance_test.cc: "
       "UBFUSE_WRITE_ONNX_DOC=docs/onnx.md build/ubfuse_tests "
       "--gtest_filter='OnnxConformance.*'. Do not edit by hand. -->\n\n"
    << "`ubfuse::import_onnx(path)` (include/ubfuse/onnx.h) and `ubfuse run MODEL.onnx` import "
       "ONNX "
       "models through Debian's ONNX/protobuf packages. Opsets 13 to 18 are the target (18: Pad's "
       "axes, the Reduce ops' axes input, Split's num_outputs, GroupNormalization); older "
       "models load where the ops they use are handled at their version (Softmax before 13 views "
       "its input as 2-D; Unsqueeze, Squeeze, Split and ReduceSum take attributes before 13; "
       "before 7, the binary arithmetic, comparison and logic ops and Pow broadcast only with "
       "`broadcast` = 1, B aligned at `axis` or at A's last dims, PRelu's slope is one value or "
       "one per channel, and BatchNormalization runs in training mode unless `is_test` is 1, "
       "where Dropout's training mode is rejected).\n\n"
    << "* Initializers and `Constant` nodes become constants (raw and typed data, external data "
       "files relative to the model's folder, which they may not leave; DOUBLE is converted to "
       "FLOAT with a note). Element types: FLOAT, FLOAT16, BFLOAT16, INT64, INT32, INT8, UINT8, "
       "BOOL.\n"
    << "* Loading copies each weight once. The file is mapped into memory, and the `raw_data` of "
       "the main graph's initializers is lifted out of the bytes before protobuf parses the rest "
       "(`src/import/onnx/model_parse.h`), then copied into its tensor; external data is read from "
       "its file straight into the tensor. Tensors of 2 MiB and more "
       "are placed on transparent huge pages where the kernel allows it (`madvise` mode). "
       "`onnx_model_inputs` and `onnx_model_op_types` read no weights at all. Times: "
       "[performance.md](performance.md), \"Loading models\".\n"
    << "* int8 and uint8 (ubfuse's `i8`, `u8`): initializers, `Constant` nodes, graph inputs and "
       "outputs, `.npy` files (`|i1`, `|u1`) and the Python binding (numpy int8/uint8) carry them. "
       "Data movement (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Split, Concat, "
       "Expand, Tile, Pad, Gather*, Scatter* without a reduction, Identity, Shape, Size), "
       "`MaxPool`, "
       "`Where`, "
       "`Cast` (from and to every dtype; a float out of the target's range saturates, NaN gives "
       "0, an integer wraps), integer elementwise arithmetic as ONNX's reference (numpy) computes "
       "it: `Add`, `Sub`, `Mul` (wrapping modulo 2^8), `Div` (truncating toward zero; a "
       "division by zero is an error at run time, as for int32 and int64, not a crash), `Mod` "
       "(fmod 0: the sign of the divisor; fmod 1: of the dividend), `Max`, `Min`, `Clip` (min and "
       "max of the same dtype; without them the dtype's range), `Neg`, `Abs` (wrapping: -(-128) "
       "is -128), `Relu`, `Sign`, the comparisons (`Equal`, `Less`, `Greater`, `LessOrEqual`, "
       "`GreaterOrEqual`) and the quantization ops take them: `QuantizeLinear`, "
       "`DequantizeLinear` (opset 13: per tensor or per axis, f32 scales, u8 or i8 zero points, "
       "u8 without one; DequantizeLinear also i32), `DynamicQuantizeLinear` (u8), "
       "`MatMulInteger` (u8/i8 operands, zero points per tensor, per row of A, per column of B; "
       "batched like MatMul), `QLinearMatMul` (scales and zero points per tensor, per row of a, "
       "per column of b) and `ConvInteger` (1-D and 2-D, Conv's attributes, w's zero point per "
       "output channel), each bit-exact with ONNX's definition: round half to even, saturation. "
       "The integer products run on oneDNN's int8 matmul where the CPU has VNNI, else on an "
       "exact loop. Any other op given an 8-bit tensor (`Pow`, `Sum`, the reductions, `MatMul`, "
       "...) is `OnnxUnsupportedError` naming the node, the input and its dtype. In graph mode "
       "the quantization ops and the arithmetic on 8-bit values run as their own kernels (the "
       "eager ones) and nothing that reads or writes an 8-bit value fuses (fusion check "
       "`Int8Value`).\n"
    << "* A graph input's `dim_param` becomes a symbolic dim; a dim with neither value nor "
       "param gets a fresh symbol (a `dim_param` is one name whatever it spells: characters "
       "outside symbol names become `_`). Shape arithmetic (Shape, Gather, Unsqueeze, Concat, "
       "Slice, Add, Sub, Mul, exact Div, ...) is folded at import, symbolically where it can be "
       "(dims are polynomials of symbols, such as `past+seq-1`). What no polynomial states "
       "becomes a shape value computed at run time: `Shape` of a symbolic tensor, arithmetic on "
       "it, `Range` over a symbolic length, `ConstantOfShape`, and Reshape/Expand/Slice whose "
       "shape or bounds are graph inputs or computed run on the host when the plan for a set "
       "of input sizes (and those inputs' contents) is built; fused kernels are compiled once. "
       "Trilu's mask over a symbolic size or with k given at run time is computed the same way, "
       "and so is TopK's K when it is not a constant. Axes given at run time (Unsqueeze, "
       "Squeeze, the Reduce ops' axes input, CumSum's axis), Split's sizes, Tile's repeats and "
       "Pad's pads and axes are read the same way: their number (the input's static length) fixes "
       "the rank, "
       "and "
       "`AxesShape` computes the Reshape target, Transpose perm or Slice offsets from them when "
       "the plan is built, checking each value against the shape (an error naming the node, "
       "the values and the shape). Constant split sizes or repeats on a symbolic axis take the "
       "same run-time path (the plan checks that the sizes add up to the axis). Splitting a "
       "symbolic axis into equal parts (no sizes given) fails with `OnnxNeedsStaticDimsError` "
       "naming "
       "the symbols, which `ImportOptions::static_dims` / `ubfuse run --dim NAME=N` fix. "
       "Resize's scales or sizes (opsets 10 to 19; Upsample of opset 9 imports as a Resize) may "
       "be constants, shape values or graph inputs: the plan reads them, the resized dims are "
       "its to know (a symbolic dim times a whole constant scale stays a polynomial).\n"
    << "* Ops without a ubfuse op of their own are lowered at import: Unsqueeze/Squeeze/Flatten "
       "-> Reshape, Split -> Slices, Gemm -> (Transpose) MatMul (+ Mul) + Add, "
       "LayerNormalization -> LayerNorm, InstanceNormalization -> GroupNorm with one group per "
       "channel (GroupNormalization's per-group scale and bias of opset 18 are repeated per "
       "channel, as opset 21 has them), Softmax/reductions over other axes -> Transpose + the "
       "last-axis op; integer ReduceSum/ReduceSumSquare/ReduceL1 -> the last of CumSum's running "
       "sums, integer ReduceMax/ReduceMin -> the element ArgMax/ArgMin picks (GatherElements), "
       "exact where ubfuse's row reductions compute in float; Trilu -> a folded constant or "
       "Where over a constant mask, "
       "LessOrEqual -> Not(Greater) (differs for NaN), And/Or/Xor -> Where/Equal, activations -> "
       "elementwise formulas, Einsum (one operand: a transpose; two: batch, contracted and free "
       "letters) -> Transposes, Reshapes and a MatMul, or a broadcast Mul for an outer product, "
       "Scatter (opsets 9 and 10) -> ScatterElements, GlobalMaxPool/GlobalAveragePool -> "
       "ReduceMax/ReduceMean over the merged spatial axes, BatchNormalization (training mode: the "
       "batch's statistics, and the "
       "running ones updated by momentum) "
       "and MeanVarianceNormalization -> elementwise ops (and reductions), LRN -> a zero Pad of "
       "the squares along the channels, a Slice per window tap and Pow, Shrink -> Where, "
       "Hardmax -> ArgMax compared with the axis' positions, OneHot -> Equal of the indices and "
       "a Range over depth (given at run time too), then Where, DepthToSpace/SpaceToDepth -> "
       "Reshape, Transpose, Reshape, ConvTranspose (1-D to 3-D) -> the Conv it equals: the input "
       "spread by the strides with zeros (Reshape, Pad), padded, and convolved with the kernel "
       "flipped and its channels swapped per group, HannWindow/HammingWindow/BlackmanWindow -> "
       "cosines of a Range over the size (given at run time too), ReverseSequence -> "
       "GatherElements along the time axis with indices from the lengths, MaxUnpool -> "
       "ScatterElements into flattened zeros, padded at the end to output_shape (given at run "
       "time too), Det (up to 3x3) -> its cofactor expansion, NegativeLogLikelihoodLoss -> "
       "GatherElements of the targets along the class axis, Neg, the weights' Gather (0 at "
       "ignore_index) and the reduction (mean: divided by the weights' sum), "
       "SoftmaxCrossEntropyLoss -> LogSoftmax over the class axis (its second output) and the "
       "same. "
       "Decomposed LayerNorm/RMSNorm/GELU/SiLU/Softmax and RoPE's "
       "rotate_half (Slice, Neg, Slice, Concat) are recovered by the canonicalize pass, not "
       "here.\n"
    << "* `RNN`, `GRU`, `LSTM`: one ubfuse op each (`src/ir/recurrent.h`), with every direction "
       "and layout, `sequence_lens` (steps past an entry's length leave Y at 0; Y_h is its last "
       "state), initial states, peepholes, `clip` (on the gates' inputs), GRU's "
       "`linear_before_reset` and LSTM's `input_forget`; activations Sigmoid, Tanh, Relu, Softsign "
       "and Softplus (those that take `activation_alpha`/`activation_beta` are "
       "`OnnxUnsupportedError`). The kernel computes in f32 (bf16 and f16 operands widened): the "
       "input projections of all steps as one oneDNN matmul per direction, then per step the "
       "batch entries' h R^T against R^T packed in panels (eight entries per pass over it on "
       "AVX-512, four on AVX2), a direction and a block of entries per task; graph mode runs it "
       "as its own kernel. "
       "Checked against ONNX's tests, PyTorch's LSTM/GRU/RNN exports "
       "(`tests/models/rnn_stack.onnx`) "
       "and the reference.\n"
    << "* `DFT` (opset 17: `axis`, `inverse`, `onesided`; `dft_length` cuts or zero-pads the "
       "signal, given at import or at run time) and `STFT` (`frame_step`, `window`, "
       "`frame_length`, `onesided`; the frames a Gather at each frame's start plus the offsets, "
       "times the window, none for a signal shorter than a frame): real or complex signals, "
       "lowered at import to two MatMuls with a "
       "cosine and a sine basis. Its angles are 2 pi (k t mod L) / L with k t exact in int64, "
       "reduced to a quarter turn so that the quarter points are exact; with a constant length "
       "the basis folds into constants at import, else it is computed per call. Computed in f32 "
       "(f16 and bf16 signals widened, the result narrowed). A direct DFT is n x bins "
       "multiply-adds per transform: the size of a spectrogram's frames, not a long FFT (a basis "
       "past 2^26 values, known at import, is `OnnxUnsupportedError`). "
       "`MelWeightMatrix` of constant inputs becomes a constant at import, computed as ONNX's "
       "reference computes it (in double, the filters' edges in whole spectrogram bins by "
       "numpy's floor division; at most 2^26 values); given at run time its inputs are "
       "`OnnxUnsupportedError` "
       "(ONNX's test feeds them as graph inputs, so it is skipped).\n"
    << "* onnxruntime's contrib ops (domain `com.microsoft`) that its graph optimizer writes "
       "into the models it saves (`optimized_model_filepath`, `scripts/ort.sh "
       "--save-optimized`): `FusedMatMul` (`alpha`, `transA`, `transB`; `transBatchA`/`B` are "
       "`OnnxUnsupportedError`) -> (Transpose) MatMul (+ Mul), `Gelu`, `BiasGelu`, `FastGelu` "
       "(with or without bias) -> Gelu (erf; tanh for FastGelu), `QuickGelu` -> x Sigmoid(alpha "
       "x), `SkipLayerNormalization` and `SkipSimplifiedLayerNormalization` -> Add (+ bias) and "
       "LayerNorm or RMSNorm, the sum as output 3 (the statistics outputs 1 and 2 are "
       "`OnnxUnsupportedError` when used), and `SimplifiedLayerNormalization` (which onnxruntime "
       "registers in the default domain) -> RMSNorm; and `MatMulNBits` (4 or 8 bits, blocks "
       "along K, packed uint8 zero points or the default 2^(bits-1), a bias; no `g_idx`), which "
       "onnxruntime's 4-bit quantizer and onnxruntime-genai's int4 models write: with an f32 A it "
       "runs as ubfuse's MatMulNBits on the packed weight (up to 8 rows of A through the codes "
       "themselves, more through 64-column panels dequantized in cache from a k-major copy of the "
       "codes, made when a call first has that many rows); with an f16 or bf16 A "
       "the weight is dequantized at import into a constant of A's dtype, (code - zero point) x "
       "scale, a MatMul taking 32 / bits times the packed size in memory. "
       "The attention ops of onnxruntime's transformer optimizer (and Hugging Face Optimum): "
       "`Attention` (input [B, S, hidden] times constant or run-time weights, split by "
       "`qkv_hidden_sizes` or in thirds into three products as the exported original has them; "
       "`past` [2, B, heads, P, d] before K and V, `present` their stack), `MultiHeadAttention` "
       "(query, key and value [B, L, hidden], or key and value as heads [B, heads, L, d]; `bias`; "
       "`past_key`/`past_value` and `present_key`/`present_value`) -> head Reshapes and "
       "Transposes, MatMul, the scale (`scale`, or 1/sqrt(d)), one additive mask, Softmax, "
       "MatMul, which graph mode runs as one flash-attention kernel. The mask is onnxruntime's "
       "CPU kernel's: int32 `mask_index`/`key_padding_mask` of key lengths [B], ends and starts "
       "[2B], or raw 0/1 [B, T] or [B, S, T] adds `mask_filter_value` (default -10000) to a "
       "masked key's score; `unidirectional` leaves out the keys after a query's position "
       "(counting the past); `attention_bias` [B or 1, heads or 1, S, T] is added. A 2-D or 3-D "
       "mask's dim that is a graph input's symbol of its own (GPT-2's mask [batch, \"past + 1\"]) "
       "is taken to be the size it must be (past + sequence), which the executor checks at run "
       "time; any other mismatch of symbols is `OnnxUnsupportedError`, as are Megatron's 4-D "
       "mask, `do_rotary`, "
       "`past_present_share_buffer`, `past_sequence_length`, packed QKV and the scores output. "
       "`RotaryEmbedding` (input [B, S, hidden] with `num_heads`, or [B, heads, S, d]; int64 "
       "`position_ids` [B or 1, S] or one offset; `cos_cache`/`sin_cache` [positions, r / 2]; "
       "halves or `interleaved` pairs; `rotary_embedding_dim` r below the head size passes the "
       "rest through) -> the caches' rows Gathered and spread to the head, x cos + RotateHalf(x) "
       "sin, one fused kernel in graph mode. "
       "`EmbedLayerNormalization` (int32 ids; segment embeddings, `position_ids` [B or 1, S]; "
       "`mask_index` counts each row's mask entries equal to 1; the sum as output 2) -> Gathers, "
       "Adds and LayerNorm. `GroupQueryAttention`, the attention onnxruntime's model builder "
       "writes into the LLaMA-style models onnxruntime-genai runs (query [B, S, heads x d] with "
       "key and value [B, S, kv_num_heads x d], or all three packed in query; `past_key`/"
       "`past_value` [B, kv_num_heads, P, d] before K and V, `present_key`/`present_value` the "
       "results; `do_rotary` with `cos_cache`/`sin_cache` at `position_ids` or P + 0..S-1, halves "
       "or `rotary_interleaved` pairs, partial; `softcap`; `attention_bias`; `local_window_size`; "
       "`scale`) -> the heads, RoPE, Concat, each K and V head Expanded to its query heads and "
       "the attention above, one flash-attention kernel in graph mode (a softcap's tanh leaves "
       "the chain unfused). A key is left out where it is after the query's position, past "
       "`seqlens_k` (a right-padded first prompt) or before the window, as onnxruntime 1.30's CPU "
       "kernel computes it. It keeps the cache as the past followed by the new keys, which is "
       "onnxruntime's cache where `total_sequence_length` is past + sequence and, after the "
       "first prompt, every sequence has that length: a check run with the node raises an error "
       "naming the lengths otherwise (a cache of its maximum length updated in place, "
       "`past_present_share_buffer`; a batch of sequences of different lengths after the first "
       "prompt). `smooth_softmax`, `head_sink` and `qk_output` are `OnnxUnsupportedError`. Other "
       "com.microsoft ops are `OnnxUnsupportedError` listing these. A shape vector's "
       "`Split` (onnxruntime's rewrite of the Gathers of a shape) keeps its symbolic dims. "
       "`tests/models/*_ortopt.onnx` are onnxruntime's optimized graphs of four zoo models, and "
       "`tests/models/bert_stack_ortfused.onnx` a BERT in its transformer optimizer's form, each "
       "checked against the originals' references.\n"
    << "* `If`: both branches are imported (values of the enclosing graph that a branch reads "
       "become its inputs) and compiled once; the condition, a bool graph input or a value "
       "computed from shapes, is read when the plan for a run is built, and the outputs of "
       "either branch feed the rest of the graph, their dims differing where the branches "
       "differ (a cache extended or started). A condition computed from tensor data runs on the "
       "host while planning when that data is a graph input of at most 4096 elements (its "
       "contents then key the plan cache); from a larger one it is an error at compile time "
       "naming the input.\n"
    << "* An unsupported op, attribute value or dtype throws `OnnxUnsupportedError` naming the "
       "node, op and attribute (and listing the supported ops); a malformed file throws "
       "`ubfuse::Error`.\n\n"
    << "## Supported ops (" << supported.size() << ")\n\n";
  std::string list;
  for (auto& op : supported) list += (list.empty() ? "" : ", ") + ("`" + op + "`");
  f << list << "\n\n"
    << testing::onnx_op_table() << "\n"
    << "## Conformance: ONNX backend tests\n\n"
    << "Every test in libonnx-testdata's `data/node` (ONNX's node tests), "
       "`data/pytorch-converted` and `data/pytorch-operator` (modules and operators PyTorch "
       "exported at opset 6, named `pytorch-converted/test_...` below) and `data/simple` (small "
       "models) runs in eager and in graph mode (tile "
       "interpreter); outputs must match within rtol 1e-3, atol 1e-5 (f32). A test that uses an "
       "unsupported op, attribute or dtype is skipped, and so is one whose test data contradicts "
       "its model's declared input shape. Test data that stores bfloat16 as UINT16 bit patterns "
       "(numpy has no bfloat16) is read as bfloat16 where the model declares BFLOAT16. A test "
       "counts for every op its model uses.\n\n"
    << "Totals: " << records.size() << " tests, " << totals[0] << " passed, " << totals[1]
    << " skipped, " << totals[2] << " failed.\n\n"
    << "| op | supported | tests | passed | skipped | failed |\n"
    << "| --- | --- | ---: | ---: | ---: | ---: |\n";
  for (auto& [op, c] : per_op) {
    if (!supported.count(op) && c[0] == 0) continue;
    f << "| " << op << " | " << (supported.count(op) ? "yes" : "no") << " | " << c[0] + c[1] + c[2]
      << " | " << c[0] << " | " << c[1] << " | " << c[2] << " |\n";
  }
  f << "\nOps the tests use that ubfuse does not support: ";
  std::string missing;
  for (auto& [op, c] : per_op) {
    if (!supported.count(op) && c[0] == 0) missing += (missing.empty() ? "" : ", ") + op;
  }
  f << missing << ".\n\n## Skipped tests of supported ops\n\n";
  for (auto& r : records) {
    if (r.status != Status::Skip) continue;
    bool all_supported = true;
    for (auto& op : r.ops) all_supported &= supported.count(op) > 0;
    if (all_supported) f << "* `" << r.test << "`: " << short_reason(r.reason) << "\n";
  }
}

TEST(OnnxConformance, BackendNodeTests) {
  // (set, folder of its tests): Debian's sets, or the one folder UBFUSE_ONNX_TESTDATA names.
  std::vector<std::pair<std::string, fs::path>> sets;
  if (std::string dir = env("UBFUSE_ONNX_TESTDATA"); !dir.empty()) {
    sets.emplace_back("", dir);
  } else {
    for (const char* set : kTestSets) {
      sets.emplace_back(set, fs::path("/usr/share/libonnx-testdata/data") / set);
    }
  }
  if (!fs::exists(sets[0].second))
    GTEST_SKIP() << "no ONNX test data at " << sets[0].second << " (apt install libonnx-testdata)";
  std::string filter = env("UBFUSE_ONNX_FILTER");
  Options eager{{"ge.exec.enableOperatorFusion", "0"}};
  Options graph{{"ge.exec.enableOperatorFusion", "1"},
                {"codegen", env("UBFUSE_ONNX_CODEGEN", "interpreter")}};
  std::vector<std::pair<std::string, fs::path>> dirs;
  for (auto& [set, root] : sets) {
    if (!fs::exists(root)) {
      ADD_FAILURE() << "no ONNX test data at " << root << " beside " << sets[0].second;
      continue;
    }
    std::vector<fs::path> in_set;
    for (auto& e : fs::directory_iterator(root)) {
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) in_set.push_back(e.path());
    }
    std::sort(in_set.begin(), in_set.end());
    for (auto& d : in_set) dirs.emplace_back(set, d);
  }
  std::vector<Record> records;
  int counts[3] = {0, 0, 0};
  for (auto& [set, d] : dirs) {
    if (!filter.empty() && d.filename().string().find(filter) == std::string::npos) continue;
    records.push_back(run_test(d, set, eager, graph));
    const Record& r = records.back();
    counts[int(r.status)]++;
    if (r.status == Status::Fail) ADD_FAILURE() << r.test << ": " << r.reason;
    if (env("UBFUSE_ONNX_VERBOSE") == "1") {
      std::printf("%s %s %s\n",
                  r.status == Status::Pass   ? "PASS"
                  : r.status == Status::Skip ? "SKIP"
                                             : "FAIL",
                  r.test.c_str(), short_reason(r.reason).c_str());
    }
  }
  std::printf("[onnx conformance] %zu tests: %d passed, %d skipped (unsupported), %d failed\n",
              records.size(), counts[0], counts[1], counts[2]);
  std::string doc = env("UBFUSE_WRITE_ONNX_DOC");
  if (!doc.empty() && filter.empty()) write_doc(doc, records);
  // The suite must exercise the importer, not skip everything.
  if (filter.empty()) {
    EXPECT_GT(counts[0], 200);
  }
}

}  // namespace
}  // namespace ubfuse
