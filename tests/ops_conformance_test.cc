// Every op, through compile() in eager and graph mode, against the double reference: f32/bf16/f16,
// odd sizes (1, 3, 4097), size-1 dims and broadcasting (after ggml's test-backend-ops).
#include "ops_conformance_cases.h"
#include "test_util.h"

namespace ubfuse {
namespace testing {
namespace {

using testing::in;

}  // namespace

std::vector<OpCase> op_conformance_cases() {
  auto un = [](OpKind k, double lo = -2, double hi = 2) {
    return OpCase{
        std::string(op_name(k)),
        [k](GraphBuilder& b, DType t, const Sizes& s) { return b.op(k, {in(b, "x", t, s)}); }, lo,
        hi};
  };
  auto bin = [](OpKind k, double lo = -2, double hi = 2) {
    return OpCase{std::string(op_name(k)),
                  [k](GraphBuilder& b, DType t, const Sizes& s) {
                    Sizes last{s.back()};  // second operand broadcast along the last axis
                    return b.op(k, {in(b, "a", t, s), in(b, "b", t, last)});
                  },
                  lo, hi};
  };
  std::vector<OpCase> c = {
      un(OpKind::Neg),
      un(OpKind::Abs),
      un(OpKind::Exp),
      un(OpKind::Log, 0.1, 4),
      un(OpKind::Sqrt, 0.01, 4),
      un(OpKind::Rsqrt, 0.1, 4),
      un(OpKind::Reciprocal, 0.5, 4),
      un(OpKind::Tanh),
      un(OpKind::Sigmoid),
      un(OpKind::Relu),
      un(OpKind::Silu),
      un(OpKind::Erf),
      un(OpKind::Sin, -7, 7),
      un(OpKind::Cos, -7, 7),
      // Rotary embeddings take cos/sin of positions * frequencies into the thousands.
      {"SinCosLarge",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto c = b.cos(x);  // its own statement: node order must not be the compiler's
         return b.add(b.sin(x), c);
       },
       -5000, 5000},
      un(OpKind::Tan, -1.5, 1.5),
      un(OpKind::Asin, -1, 1),
      un(OpKind::Acos, -1, 1),
      un(OpKind::Atan, -4, 4),
      un(OpKind::Sinh, -6, 6),
      un(OpKind::Cosh, -6, 6),
      un(OpKind::Asinh, -6, 6),
      un(OpKind::Acosh, 1, 8),
      un(OpKind::Atanh, -0.99, 0.99),
      // Past |x| = 9 sinh and cosh take e^|x| / 2, finite up to their own overflow (f32: ~89.4).
      {"SinhLarge", [](GraphBuilder& b, DType t, const Sizes& s) { return b.sinh(in(b, "x", t, s)); },
       -89, 89},
      {"CoshLarge", [](GraphBuilder& b, DType t, const Sizes& s) { return b.cosh(in(b, "x", t, s)); },
       -89, 89},
      {"AtanAsinhLarge",  // 1 / x of tiny x: atan near +-pi/2, asinh through its log(2x) branch
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto r = b.reciprocal(in(b, "x", t, s));
         auto h = b.asinh(r);  // as in SinCosLarge
         return b.add(b.atan(r), h);
       },
       -0.01, 0.01},
      un(OpKind::Floor, -4, 4),
      un(OpKind::Ceil, -4, 4),
      un(OpKind::Round, -4, 4),
      un(OpKind::Sign),
      {"IsNaNLog",  // log of a negative number is NaN
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.is_nan(b.log(in(b, "x", t, s))); }},
      {"IsInfLogFloor",  // floor(x) = 0 gives log = -inf
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.is_inf(b.log(b.abs(b.floor(in(b, "x", t, s)))));
       }},
      {"SignInt",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.sign(b.cast(in(b, "x", t, s), i32));
       },
       -3, 3},
      bin(OpKind::Add),
      bin(OpKind::Sub),
      bin(OpKind::Mul),
      bin(OpKind::Div, 0.5, 3),
      bin(OpKind::Max),
      bin(OpKind::Min),
      bin(OpKind::Mod, -4, 4),
      bin(OpKind::Fmod, -4, 4),
      bin(OpKind::PowTensor, 0.1, 3),
      {"PowTensorIntegral",  // negative bases, integral exponents (repeated squaring)
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "a", t, s), e = b.floor(in(b, "b", t, Sizes{s.back()}));
         return b.pow_tensor(x, e);
       },
       -3, 4},
      // Integers: floats truncated by a Cast; divisors that truncate to 0 become 7.
      {"ModFmodInt",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = b.cast(in(b, "a", t, s), i64);
         auto d = b.cast(in(b, "b", t, Sizes{s.back()}), i64);
         auto zero = b.constant(Tensor::from_floats(i64, {}, {0}));
         d = b.where(b.equal(d, zero), b.constant(Tensor::from_floats(i64, {}, {7})), d);
         return b.add(b.mul(b.mod(x, d), b.constant(Tensor::from_floats(i64, {}, {100}))),
                      b.fmod(x, d));
       },
       -20, 20},
      {"PowTensorInt",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = b.cast(in(b, "a", t, s), i32);
         auto e = b.abs(b.cast(in(b, "b", t, Sizes{s.back()}), i32));
         return b.pow_tensor(x, e);
       },
       -6, 6},
      {"GeluErf",
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.gelu(in(b, "x", t, s)); }},
      {"GeluTanh",
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.gelu(in(b, "x", t, s), true); }},
      {"Pow2", [](GraphBuilder& b, DType t, const Sizes& s) { return b.pow(in(b, "x", t, s), 2); }},
      {"Pow1.5",
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.pow(in(b, "x", t, s), 1.5); }, 0.1,
       3},
      {"CastF32",
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.cast(in(b, "x", t, s), f32); }},
      {"WhereGreater",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto a = in(b, "a", t, s), c = in(b, "c", t, Sizes{s.back()});
         auto c2 = b.mul(c, 2.0);  // as in SinCosLarge
         return b.where(b.greater(a, c), a, c2);
       }},
      {"LayerNorm",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.layer_norm(in(b, "x", t, s), in(b, "w", t, {s.back()}),
                             in(b, "b", t, {s.back()}));
       }},
      {"LayerNormNoAffine",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.layer_norm(in(b, "x", t, s), nullptr, nullptr);
       }},
      {"RMSNorm",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.rms_norm(in(b, "x", t, s), in(b, "w", t, {s.back()}));
       }},
      {"Softmax",
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.softmax(in(b, "x", t, s)); }},
      {"ReduceSum",
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.reduce_sum(in(b, "x", t, s)); }},
      {"ReduceMeanNoKeep", [](GraphBuilder& b, DType t,
                              const Sizes& s) { return b.reduce_mean(in(b, "x", t, s), false); }},
      {"ReduceMax",
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.reduce_max(in(b, "x", t, s)); }},
      // Products of values near 1, so long rows neither vanish nor overflow.
      {"ReduceProd",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.op(OpKind::ReduceProd, {in(b, "x", t, s)}, {{"keepdims", int64_t(1)}});
       },
       0.8, 1.22},
      {"ReduceProdNoKeep",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.op(OpKind::ReduceProd, {in(b, "x", t, s)}, {{"keepdims", int64_t(0)}});
       },
       -1.2, 1.2},
      {"MatMul",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.matmul(in(b, "a", t, s), in(b, "w", t, {s.back(), 5}));
       }},
      {"Transpose",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<int64_t> perm;
         for (int64_t i = int64_t(s.size()) - 1; i >= 0; i--) perm.push_back(i);
         return b.transpose(in(b, "x", t, s), perm);
       }},
      {"Reshape",
       [](GraphBuilder& b, DType t, const Sizes& s) { return b.reshape(in(b, "x", t, s), {-1}); }},
      {"Slice",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.slice(in(b, "x", t, s), {-1}, {-1000000}, {int64_t(s.size()) - 1}, {-2});
       }},
      {"Concat",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         return b.concat({x, b.neg(x)}, 0);
       }},
      {"Expand",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         Sizes one = s;
         one[0] = 1;
         Shape target = to_shape(s);
         target.emplace(target.begin(), int64_t(2));  // in place: GCC 12 misreads a moved Dim
         return b.expand(in(b, "x", t, one), target);
       }},
      // Conv: batch from the shape's first dim (rank 3 and up), length its last, height the one
      // before (rank 2 and up), depth the one before that (rank 3 and up); pads so that a length
      // of 1 still gives an output.
      {"Conv1d",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 1 ? s[0] : 1;
         ConvOptions o;
         o.pads = {1, 1};
         return b.conv(in(b, "x", t, {n, 2, s.back()}), in(b, "w", t, {3, 2, 3}),
                       in(b, "bias", t, {3}), o);
       }},
      {"Conv2dStridedDilated",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 2 ? s[0] : 1, h = s.size() > 1 ? s[s.size() - 2] : 1;
         ConvOptions o;
         o.strides = {2, 1};
         o.dilations = {1, 2};
         o.pads = {1, 2, 1, 2};
         return b.conv(in(b, "x", t, {n, 3, h, s.back()}), in(b, "w", t, {4, 3, 3, 3}),
                       in(b, "bias", t, {4}), o);
       }},
      {"ConvDepthwiseSameUpper",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 1 ? s[0] : 1;
         ConvOptions o;
         o.group = 4;
         o.strides = {2};
         o.auto_pad = "SAME_UPPER";
         return b.conv(in(b, "x", t, {n, 4, s.back()}), in(b, "w", t, {4, 1, 4}), nullptr, o);
       }},
      {"ConvGroupedSameLower",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t h = s.size() > 1 ? s[s.size() - 2] : 1;
         ConvOptions o;
         o.group = 2;
         o.strides = {1, 3};
         o.auto_pad = "SAME_LOWER";
         return b.conv(in(b, "x", t, {1, 4, h, s.back()}), in(b, "w", t, {6, 2, 2, 3}),
                       in(b, "bias", t, {6}), o);
       }},
      {"Conv3dGroupedStridedDilated",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const size_t r = s.size();
         const int64_t dp = r > 2 ? s[r - 3] : 1, h = r > 1 ? s[r - 2] : 1;
         ConvOptions o;
         o.group = 2;
         o.strides = {1, 2, 1};
         o.dilations = {2, 1, 1};
         o.pads = {1, 1, 0, 1, 1, 2};
         return b.conv(in(b, "x", t, {1, 4, dp, h, s.back()}), in(b, "w", t, {6, 2, 2, 3, 2}),
                       in(b, "bias", t, {6}), o);
       }},
      {"ConvValidConstantWeights",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         ConvOptions o;
         o.auto_pad = "VALID";
         Tensor w = Tensor::random(t, {5, 3, 1}, 7, -1, 1);
         return b.conv(in(b, "x", t, {1, 3, s.back()}), b.constant(w), nullptr, o);
       }},
      // Pooling: N from the shape's first dim (rank 3 and up), W its last, H the one before.
      {"MaxPool2dPadsStridesDilations",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 2 ? s[0] : 1, h = s.size() > 1 ? s[s.size() - 2] : 1;
         return b.op(OpKind::MaxPool, {in(b, "x", t, {n, 2, h, s.back()})},
                     {{"kernel_shape", std::vector<int64_t>{2, 3}},
                      {"strides", std::vector<int64_t>{2, 1}},
                      {"dilations", std::vector<int64_t>{1, 2}},
                      {"pads", std::vector<int64_t>{1, 2, 1, 2}}});
       }},
      {"MaxPool1dCeilIndices",  // values and flat indices; ceil_mode drops a window of pads
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 1 ? s[0] : 1;
         auto vi = b.op_outputs(OpKind::MaxPool, {in(b, "x", t, {n, 3, s.back()})},
                                {{"kernel_shape", std::vector<int64_t>{2}},
                                 {"strides", std::vector<int64_t>{2}},
                                 {"pads", std::vector<int64_t>{1, 1}},
                                 {"ceil_mode", int64_t(1)}},
                                2);
         return b.add(vi[0], b.mul(b.cast(vi[1], t), 0.001));
       }},
      {"MaxPool3dSameLowerColumnMajorIndices",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t d = s.size() > 2 ? s[0] : 1, h = s.size() > 1 ? s[s.size() - 2] : 1;
         auto vi = b.op_outputs(OpKind::MaxPool, {in(b, "x", t, {1, 2, d, h, s.back()})},
                                {{"kernel_shape", std::vector<int64_t>{2, 1, 3}},
                                 {"strides", std::vector<int64_t>{1, 1, 2}},
                                 {"auto_pad", std::string("SAME_LOWER")},
                                 {"storage_order", int64_t(1)}},
                                2);
         return b.add(vi[0], b.mul(b.cast(vi[1], t), 0.001));
       }},
      {"AveragePool2dCeilExcludePad",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 2 ? s[0] : 1, h = s.size() > 1 ? s[s.size() - 2] : 1;
         return b.op(OpKind::AveragePool, {in(b, "x", t, {n, 3, h, s.back()})},
                     {{"kernel_shape", std::vector<int64_t>{3, 3}},
                      {"strides", std::vector<int64_t>{2, 2}},
                      {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                      {"ceil_mode", int64_t(1)}});
       }},
      {"AveragePool1dSameUpperIncludePad",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.op(OpKind::AveragePool, {in(b, "x", t, {2, 1, s.back()})},
                     {{"kernel_shape", std::vector<int64_t>{4}},
                      {"strides", std::vector<int64_t>{3}},
                      {"auto_pad", std::string("SAME_UPPER")},
                      {"count_include_pad", int64_t(1)}});
       }},
      {"AveragePool3dDilated",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t d = s.size() > 2 ? s[0] : 1, h = s.size() > 1 ? s[s.size() - 2] : 1;
         // the dilated axis unpadded and long enough for one window
         return b.op(OpKind::AveragePool, {in(b, "x", t, {1, 1, d, h, s.back() + 3})},
                     {{"kernel_shape", std::vector<int64_t>{2, 2, 2}},
                      {"dilations", std::vector<int64_t>{1, 1, 2}},
                      {"pads", std::vector<int64_t>{1, 0, 0, 0, 1, 0}}});
       }},
      // GroupNorm: x [N, C, positions...] from the shape (N its first dim at rank 2 and up).
      {"GroupNorm",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 1 ? s[0] : 1;
         Sizes xs{n, 6};
         xs.insert(xs.end(), s.begin() + (s.size() > 1 ? 1 : 0), s.end());
         return b.group_norm(in(b, "x", t, xs), in(b, "w", t, {6}), in(b, "b", t, {6}), 3);
       }},
      {"InstanceNorm",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.group_norm(in(b, "x", t, {2, 3, s.back()}), in(b, "w", t, {3}),
                             in(b, "b", t, {3}), 3, 1e-3);
       }},
      {"GroupNormOneGroupNoAffine",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.group_norm(in(b, "x", t, {1, 5, s.back()}), nullptr, nullptr, 1);
       }},
      // Pad: every mode, pads past the axis' length (repeated reflection), a crop.
      {"PadConstant",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<int64_t> pads(2 * s.size(), 0);
         pads[0] = 1;                    // axis 0 begins with a row of fill
         pads[s.size() - 1] += 2;        // the last axis: 2 before,
         pads[2 * s.size() - 1] = 3;     // 3 after
         return b.pad(in(b, "x", t, s), pads, "constant", in(b, "v", t, {}));
       }},
      {"PadReflect",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<int64_t> pads(2 * s.size(), 0);
         pads[s.size() - 1] = 4;
         pads[2 * s.size() - 1] = 2;
         pads[s.size()] = 1;  // axis 0 ends with a reflected row
         return b.pad(in(b, "x", t, s), pads, "reflect");
       }},
      {"PadEdgeCrop",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<int64_t> pads(2 * s.size(), 0);
         pads[0] = 2;
         pads[s.size() - 1] -= 1;  // crops the last axis' first element
         pads[2 * s.size() - 1] = 3;
         return b.pad(in(b, "x", t, s), pads, "edge");
       }},
      {"PadPadsOperandReflect",  // (x, value, pads): the pads a value operand (ONNX's input)
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<float> pads(2 * s.size(), 0);
         pads[s.size() - 1] = 2;
         pads[s.size()] = 1;
         auto p = b.constant(Tensor::from_floats(i64, {int64_t(pads.size())}, pads));
         auto zero = b.constant(Tensor::from_floats(t, {}, {0}));
         return b.op(OpKind::Pad, {in(b, "x", t, s), zero, p}, {{"mode", std::string("reflect")}});
       }},
      // Resize: every axis of the shape resized (size-1 and 4097-long ones too), scales or sizes
      // as constants (ONNX's run-time ones: OnnxConformance's test_resize_*).
      {"ResizeCubicExcludeOutside",  // up on the last axis, down on the others
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<float> sc(s.size(), 0.6f);
         sc.back() = 1.5f;
         return b.op(OpKind::Resize,
                     {in(b, "x", t, s), b.constant(Tensor::from_floats(f32, {int64_t(sc.size())}, sc))},
                     {{"mode", std::string("cubic")},
                      {"cubic_coeff_a", -0.5},
                      {"exclude_outside", int64_t(1)}});
       }},
      {"ResizeLinearAntialiasSizesAlignCorners",  // the last axis shrunk to about 2/5 by sizes
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const float o = float(std::max<int64_t>(1, s.back() * 2 / 5));
         return b.op(OpKind::Resize,
                     {in(b, "x", t, s), b.constant(Tensor::from_floats(i64, {1}, {o}))},
                     {{"mode", std::string("linear")},
                      {"antialias", int64_t(1)},
                      {"axes", std::vector<int64_t>{-1}},
                      {"coordinate_transformation_mode", std::string("align_corners")}});
       }},
      {"ResizeNearestCeilAsymmetricNotSmaller",  // sizes kept to the aspect ratio
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<float> sz;
         for (size_t i = 0; i < s.size(); i++) sz.push_back(float(i % 2 ? s[i] + 2 : s[i] * 2));
         return b.op(OpKind::Resize,
                     {in(b, "x", t, s), b.constant(Tensor::from_floats(i64, {int64_t(sz.size())}, sz))},
                     {{"mode", std::string("nearest")},
                      {"nearest_mode", std::string("ceil")},
                      {"keep_aspect_ratio_policy", std::string("not_smaller")},
                      {"coordinate_transformation_mode", std::string("asymmetric")}});
       }},
      {"ResizeTfCropAndResizeLinear",  // a crop past the input's start: extrapolated there
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<float> sc(s.size(), 1.0f), roi(2 * s.size(), 0.0f);
         sc.back() = 2.0f;
         for (size_t i = 0; i < s.size(); i++) roi[s.size() + i] = 1.0f;
         roi[s.size() - 1] = -0.2f;
         roi.back() = 0.7f;
         return b.op(OpKind::Resize,
                     {in(b, "x", t, s), b.constant(Tensor::from_floats(f32, {int64_t(sc.size())}, sc)),
                      b.constant(Tensor::from_floats(f32, {int64_t(roi.size())}, roi))},
                     {{"mode", std::string("linear")},
                      {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                      {"extrapolation_value", 5.0}});
       }},
      {"Gather",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         Tensor idx = Tensor::from_floats(i64, {3}, {0, -1, 0});
         return b.gather(in(b, "x", t, s), b.constant(idx), 0);
       }},
      {"NotLess",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto a = in(b, "a", t, s), c = in(b, "c", t, Sizes{s.back()});
         return b.where(b.logical_not(b.less(a, c)), a, c);
       }},
      {"Equal",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto a = in(b, "a", t, s), c = in(b, "c", t, Sizes{s.back()});
         return b.cast(b.equal(a, b.max(a, c)), t);  // a >= c
       }},
      {"RotateHalf",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         Sizes even = s;
         even.back() *= 2;
         return b.rotate_half(in(b, "x", t, even));
       }},
      // Shape values: computed on the host when the plan is built, fed to the ops they size.
      {"Shape",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         return b.add(x, b.cast(b.shape_of(x, -1), t));  // x + x.shape[-1]
       }},
      {"Range",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto i64c = [&](float v) { return b.constant(Tensor::from_floats(i64, {}, {v})); };
         auto n = b.reshape(b.shape_of(x, -1), b.constant(Tensor(i64, {0})));
         // x + arange(n) / 4096: positions kept within the inputs' range.
         auto pos = b.cast(b.range(i64c(0), n, i64c(1)), f32);
         return b.add(x, b.cast(b.mul(pos, 1.0 / 4096), t));
       }},
      {"ConstantOfShape",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto fill = b.constant_of_shape(b.shape_of(x), Tensor::from_floats(f32, {1}, {0.5}));
         return b.add(x, b.cast(fill, t));
       }},
      {"ShapeOperands",  // Reshape, Slice and Expand with their operand forms
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto ints = [&](std::vector<float> v) {
           return b.constant(Tensor::from_floats(i64, {int64_t(v.size())}, v));
         };
         auto flat = b.reshape(x, ints({-1}));
         auto back = b.reshape(flat, b.shape_of(x));
         auto tail = b.slice(back, ints({-1}), ints({-1000000}), ints({-1}), ints({-2}));
         std::vector<float> target{2};
         for (auto& d : tail->shape) target.push_back(float(d.value()));
         return b.expand(tail, ints(target));
       }},
      // AxesShape with a Reshape (Unsqueeze, Squeeze) and with the value form of Transpose: the
      // import of a ReduceSum over axes given at run time, here over the first axis.
      {"AxesShapeUnsqueezeSqueezeReduce",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto ints = [&](std::vector<float> v) {
           return b.constant(Tensor::from_floats(i64, {int64_t(v.size())}, v));
         };
         auto axes = [&](GraphBuilder::V shape, std::vector<float> v, const char* mode) {
           return b.op(OpKind::AxesShape, {shape, ints(v)}, {{"mode", std::string(mode)}});
         };
         auto u = b.reshape(x, axes(b.shape_of(x), {-1}, "unsqueeze"), true);  // [s..., 1]
         auto back = b.reshape(u, axes(b.shape_of(u), {-1}, "squeeze"), true);
         auto moved = b.op(OpKind::Transpose, {back, axes(b.shape_of(x), {0}, "reduce_perm")});
         auto merged = b.reshape(moved, axes(b.shape_of(x), {0}, "reduce_merged"), true);
         auto sum = b.reshape(b.reduce_sum(merged), axes(b.shape_of(x), {0}, "reduce_keep"), true);
         return b.add(b.mul(x, 2.0), sum);
       }},
      // Tile's and Split's imports: Expand to AxesShape's tile vector, Reshape to its tiled one;
      // Slice between Split's offsets.
      {"AxesShapeTileSplit",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         const int64_t r = int64_t(s.size());
         auto ints = [&](std::vector<float> v) {
           return b.constant(Tensor::from_floats(i64, {int64_t(v.size())}, v));
         };
         std::vector<float> reps(size_t(r), 1), ones;
         reps[0] = 2;  // twice along the first axis
         Sizes spread;
         for (int64_t d : s) spread.insert(spread.end(), {1, d});
         auto shape = b.shape_of(x);
         auto grid = b.expand(b.reshape(x, spread),
                              b.op(OpKind::AxesShape, {shape, ints(reps)}, {{"mode", std::string("tile")}}));
         auto tiled = b.reshape(
             grid, b.op(OpKind::AxesShape, {shape, ints(reps)}, {{"mode", std::string("tiled")}}), true);
         // The two halves of the tiled axis, through offsets [0, d, 2d].
         const float d = float(s[0]);
         auto off = b.op(OpKind::AxesShape, {b.shape_of(tiled), ints({d, d})},
                         {{"mode", std::string("split")}, {"axis", int64_t(0)}});
         auto part = [&](int64_t i) {
           auto st = b.slice(off, {i}, {i + 1}, {0}, {1});
           auto en = b.slice(off, {i + 1}, {i + 2}, {0}, {1});
           return b.slice(tiled, st, en, ints({0}), ints({1}));
         };
         return b.sub(b.mul(part(0), 3.0), part(1));
       }},
      {"CumSumAxisOperand",  // the axis a value operand (ONNX's axis input), here the last one
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto axis = b.constant(Tensor::from_floats(i64, {}, {-1}));
         return b.op(OpKind::CumSum, {x, axis}, {{"reverse", int64_t(1)}});
       }},
      {"If",  // sigmoid(x) if x's last dim > 2 else -2x: the plan reads the condition
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto branch = [&](bool then) {
           GraphBuilder g;
           auto bx = in(g, "x", t, s);
           g.output("y", then ? g.sigmoid(bx) : g.mul(g.neg(bx), 2.0));
           return std::make_shared<const Graph>(g.build());
         };
         auto cond = b.greater(b.shape_of(x, -1), b.constant(Tensor::from_floats(i64, {1}, {2})));
         return b.if_(cond, branch(true), branch(false), {x})[0];
       }},
      {"ArgMax",  // indices as data: x * (argmax along the last axis + 1)
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto i = b.op(OpKind::ArgMax, {x}, {{"axis", int64_t(-1)}});
         return b.mul(x, b.cast(b.add(i, b.constant(Tensor::from_floats(i64, {}, {1}))), t));
       }},
      {"ArgMinFirstAxisLast",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         Attrs a{{"axis", int64_t(0)}, {"keepdims", int64_t(0)}, {"select_last_index", int64_t(1)}};
         return b.add(b.reduce_max(x), b.cast(b.op(OpKind::ArgMin, {b.abs(x)}, a), t));
       }},
      {"GatherElements",  // each row read in reverse along the last axis
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         std::vector<float> rev(size_t(numel(s)));
         for (size_t k = 0; k < rev.size(); k++)
           rev[k] = float(s.back() - 1 - int64_t(k) % s.back());
         auto idx = b.constant(Tensor::from_floats(i64, s, rev));
         return b.op(OpKind::GatherElements, {x, idx}, {{"axis", int64_t(-1)}});
       }},
      {"CumSum",  // along the last axis (4097 long), summed in double
       [](GraphBuilder& b, DType t, const Sizes& s) {
         return b.op(OpKind::CumSum, {in(b, "x", t, s)}, {{"axis", int64_t(-1)}});
       }},
      {"CumSumExclusiveReverseFirstAxis",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         Attrs a{{"axis", int64_t(0)}, {"exclusive", int64_t(1)}, {"reverse", int64_t(1)}};
         return b.mul(b.op(OpKind::CumSum, {x}, a), 0.5);
       }},
      {"CumSumInt",  // i32 along the last axis plus i64 along the first, exclusive
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto c32 = b.op(OpKind::CumSum, {b.cast(x, i32)}, {{"axis", int64_t(-1)}});
         Attrs a{{"axis", int64_t(0)}, {"exclusive", int64_t(1)}};
         auto c64 = b.op(OpKind::CumSum, {b.cast(x, i64)}, a);
         return b.add(b.cast(c32, i64), c64);
       },
       -20, 20},
      // TopK: random 16-bit floats repeat often, so ties (lower index first) are exercised.
      {"TopK",  // the 3 largest along the last axis (fewer when it is shorter): values + indices
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto k = b.constant(Tensor::from_floats(i64, {1}, {float(std::min<int64_t>(3, s.back()))}));
         auto vi = b.top_k(x, k);
         return b.add(vi[0], b.cast(vi[1], t));
       }},
      {"TopKSmallestFirstAxisWholeLength",  // k is x's first dim, a shape value
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = in(b, "x", t, s);
         auto vi = b.top_k(x, b.shape_of(x, 0, 1), 0, false);
         return b.sub(b.cast(vi[1], t), vi[0]);
       }},
      {"TopKInt",  // integers: many ties
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = b.cast(in(b, "x", t, s), i32);
         auto k = b.constant(Tensor::from_floats(i64, {}, {float(std::min<int64_t>(2, s.back()))}));
         auto vi = b.top_k(x, k, -1, false);
         return b.add(b.mul(b.cast(vi[0], i64), b.constant(Tensor::from_floats(i64, {}, {10000}))),
                      vi[1]);
       },
       -5, 5},
      // Recurrent cells: sequence length the shape's last dim, batch its first (rank 2 and up),
      // 2 inputs, hidden size 3; every optional input in LSTM's case, sequence_lens shortening
      // every other batch entry to half.
      {"LSTMBidirectionalPeepholesSequenceLengths",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t S = s.back(), N = s.size() > 1 ? s[0] : 1;
         std::vector<float> lens;
         for (int64_t i = 0; i < N; i++) lens.push_back(float(i % 2 ? S / 2 : S));
         auto o = b.op_outputs(
             OpKind::LSTM,
             {in(b, "x", t, {S, N, 2}), in(b, "w", t, {2, 12, 2}), in(b, "r", t, {2, 12, 3}),
              in(b, "bias", t, {2, 24}), b.constant(Tensor::from_floats(i32, {N}, lens)),
              in(b, "h0", t, {2, N, 3}), in(b, "c0", t, {2, N, 3}), in(b, "p", t, {2, 9})},
             {{"hidden_size", int64_t(3)},
              {"direction", int64_t(2)},
              {"optional", std::vector<int64_t>{3, 4, 5, 6, 7}}},
             3);
         return b.add(b.reshape(o[0], {S, 2 * N * 3}),
                      b.reshape(b.mul(o[1], o[2]), {1, 2 * N * 3}));
       }},
      {"GRULinearBeforeResetReverseClipSoftsign",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t S = s.back(), N = s.size() > 1 ? s[0] : 1;
         auto o = b.op_outputs(
             OpKind::GRU,
             {in(b, "x", t, {S, N, 2}), in(b, "w", t, {1, 9, 2}), in(b, "r", t, {1, 9, 3}),
              in(b, "bias", t, {1, 18})},
             {{"hidden_size", int64_t(3)},
              {"direction", int64_t(1)},
              {"linear_before_reset", int64_t(1)},
              {"clip", 0.7},
              {"activations", std::vector<int64_t>{0, 3}},  // Sigmoid, Softsign
              {"optional", std::vector<int64_t>{3}}},
             2);
         return b.add(o[0], o[1]);  // Y [S, 1, N, 3] + Y_h [1, N, 3]
       }},
      {"GRUThenRNNReluBatchFirst",  // GRU's default form feeding a layout-1 RNN of Relu
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t S = s.back(), N = s.size() > 1 ? s[0] : 1;
         auto g = b.op_outputs(
             OpKind::GRU,
             {in(b, "x", t, {S, N, 2}), in(b, "w", t, {1, 9, 2}), in(b, "r", t, {1, 9, 3})},
             {{"hidden_size", int64_t(3)}}, 2);
         auto xs = b.transpose(b.reshape(g[0], {S, N, 3}), {1, 0, 2});  // [N, S, 3]
         auto r = b.op_outputs(OpKind::RNN,
                               {xs, in(b, "w2", t, {1, 4, 3}), in(b, "r2", t, {1, 4, 4}),
                                in(b, "h2", t, {N, 1, 4})},
                               {{"hidden_size", int64_t(4)},
                                {"layout", int64_t(1)},
                                {"activations", std::vector<int64_t>{2}},  // Relu
                                {"optional", std::vector<int64_t>{5}}},
                               2);
         return r[0];  // [N, S, 1, 4]
       }},
      // GatherND/ScatterND: tuples over the first dims (the last and, wrapped, the first index).
      {"GatherND",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const size_t m = std::min<size_t>(2, s.size());
         std::vector<float> tuples;
         for (size_t i = 0; i < m; i++) tuples.push_back(float(s[i] - 1));
         for (size_t i = 0; i < m; i++) tuples.push_back(float(-s[i]));
         auto idx = b.constant(Tensor::from_floats(i64, {2, int64_t(m)}, tuples));
         return b.op(OpKind::GatherND, {in(b, "x", t, s), idx});
       }},
      {"GatherNDBatchDims",  // rank 2 and up: per row of the first dim, one reversed position
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t bd = s.size() > 1 ? 1 : 0;
         Sizes is = bd ? Sizes{s[0], s[1], 1} : Sizes{s[0], 1};
         std::vector<float> v(size_t(numel(is)));
         const int64_t len = s[size_t(bd)];
         for (size_t k = 0; k < v.size(); k++) v[k] = float(len - 1 - int64_t(k) % len);
         auto idx = b.constant(Tensor::from_floats(i64, is, v));
         return b.op(OpKind::GatherND, {in(b, "x", t, s), idx}, {{"batch_dims", bd}});
       }},
      {"ScatterND",  // rows -1 and 0 replaced (one row: the same, the last update kept)
       [](GraphBuilder& b, DType t, const Sizes& s) {
         Sizes us = s;
         us[0] = 2;
         auto idx = b.constant(Tensor::from_floats(i64, {2, 1}, {-1, 0}));
         return b.op(OpKind::ScatterND, {in(b, "x", t, s), idx, in(b, "u", t, us)});
       }},
      {"ScatterNDAddMul",  // row 0 plus an update, then element [last...] times one
       [](GraphBuilder& b, DType t, const Sizes& s) {
         Sizes us = s;
         us[0] = 1;
         auto x = in(b, "x", t, s);
         auto idx0 = b.constant(Tensor::from_floats(i64, {1, 1}, {0}));
         auto y = b.op(OpKind::ScatterND, {x, idx0, in(b, "u", t, us)},
                       {{"reduction", std::string("add")}});
         std::vector<float> last;
         for (int64_t d : s) last.push_back(float(d - 1));
         auto idx1 = b.constant(Tensor::from_floats(i64, {1, int64_t(s.size())}, last));
         return b.op(OpKind::ScatterND, {y, idx1, in(b, "w", t, {1})},
                     {{"reduction", std::string("mul")}});
       }},
      {"ScatterElements",  // each row written in reverse along the last axis
       [](GraphBuilder& b, DType t, const Sizes& s) {
         std::vector<float> rev(size_t(numel(s)));
         for (size_t k = 0; k < rev.size(); k++)
           rev[k] = float(s.back() - 1 - int64_t(k) % s.back());
         auto idx = b.constant(Tensor::from_floats(i64, s, rev));
         return b.op(OpKind::ScatterElements, {in(b, "x", t, s), idx, in(b, "u", t, s)},
                     {{"axis", int64_t(-1)}});
       }},
      {"ScatterElementsMaxFirstAxis",  // every row of updates into row 0 (repeated indices)
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto idx = b.constant(Tensor::zeros(i64, s));
         Attrs a{{"axis", int64_t(0)}, {"reduction", std::string("max")}};
         return b.op(OpKind::ScatterElements, {in(b, "x", t, s), idx, in(b, "u", t, s)}, a);
       }},
      {"ScatterElementsIntMinAdd",  // integers: min into row 0 (repeated), add in reverse
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto x = b.cast(in(b, "x", t, s), i32);
         auto u = b.cast(in(b, "u", t, s), i32);
         Attrs a{{"axis", int64_t(0)}, {"reduction", std::string("min")}};
         auto y = b.op(OpKind::ScatterElements, {x, b.constant(Tensor::zeros(i64, s)), u}, a);
         std::vector<float> rev(size_t(numel(s)));
         for (size_t k = 0; k < rev.size(); k++)
           rev[k] = float(s.back() - 1 - int64_t(k) % s.back());
         Attrs add{{"axis", int64_t(-1)}, {"reduction", std::string("add")}};
         return b.op(OpKind::ScatterElements, {y, b.constant(Tensor::from_floats(i64, s, rev)), u},
                     add);
       },
       -50, 50},
      // Quantization: u8/i8 values from QuantizeLinear of the float input; scales and zero
      // points as constants, per tensor and per axis (the last). Integer results must be exact.
      {"QuantizeLinearPerTensorU8",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto q = b.quantize_linear(in(b, "x", t, s), b.constant(Tensor::from_floats(f32, {}, {0.03f})),
                                    b.constant(Tensor::from_floats(u8, {}, {100})));
         return b.cast(q, i32);
       },
       -5, 5},
      {"QuantizeDequantizePerAxisI8",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t c = s.back();
         std::vector<float> sc, zp, sc2, zp2;
         for (int64_t i = 0; i < c; i++) {
           sc.push_back(0.01f + 0.002f * float(i % 7));
           zp.push_back(float(i % 11) - 5);
           sc2.push_back(0.5f + 0.25f * float(i % 3));
           zp2.push_back(float(i % 5) - 2);
         }
         const int64_t axis = int64_t(s.size()) - 1;
         auto q = b.quantize_linear(in(b, "x", t, s), b.constant(Tensor::from_floats(f32, {c}, sc)),
                                    b.constant(Tensor::from_floats(i8, {c}, zp)), axis);
         return b.dequantize_linear(q, b.constant(Tensor::from_floats(f32, {c}, sc2)),
                                    b.constant(Tensor::from_floats(i8, {c}, zp2)), axis);
       },
       -2, 2},
      {"DynamicQuantizeLinear",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto q = b.dynamic_quantize_linear(in(b, "x", t, s));
         return b.dequantize_linear(q[0], q[1], q[2]);
       },
       -1, 3},
      // MatMulInteger: u8 a (per-row zero points), i8 b (per-column zero points), 2-D b.
      {"MatMulIntegerU8I8",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t k = s.back(), m = s.size() > 1 ? s[s.size() - 2] : 1;
         auto a = b.quantize_linear(in(b, "x", t, s), b.constant(Tensor::from_floats(f32, {}, {0.01f})),
                                    b.constant(Tensor::from_floats(u8, {}, {128})));
         std::vector<float> za;
         for (int64_t i = 0; i < m; i++) za.push_back(float(120 + i % 17));
         auto w = b.constant(Tensor::random(i8, {k, 5}, 11, -128, 128));
         return b.matmul_integer(a, w, b.constant(Tensor::from_floats(u8, {m}, za)),
                                 b.constant(Tensor::from_floats(i8, {5}, {-128, -1, 0, 7, 127})));
       }},
      // i8 a, u8 b with a batch (broadcast against a's), scalar zero points.
      {"MatMulIntegerBatchedI8U8",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t k = s.back();
         auto a = b.quantize_linear(in(b, "x", t, s), b.constant(Tensor::from_floats(f32, {}, {0.015f})),
                                    b.constant(Tensor::from_floats(i8, {}, {0})));
         auto w = b.quantize_linear(in(b, "w", t, {2, k, 3}),
                                    b.constant(Tensor::from_floats(f32, {}, {0.01f})),
                                    b.constant(Tensor::from_floats(u8, {}, {128})));
         return b.matmul_integer(a, w, b.constant(Tensor::from_floats(i8, {}, {-3})),
                                 b.constant(Tensor::from_floats(u8, {}, {250})));
       }},
      {"QLinearMatMul",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t k = s.back();
         auto sc = [&](float v) { return b.constant(Tensor::from_floats(f32, {}, {v})); };
         auto a = b.quantize_linear(in(b, "x", t, s), sc(0.02f),
                                    b.constant(Tensor::from_floats(u8, {}, {128})));
         auto w = b.constant(Tensor::random(u8, {k, 4}, 13, 0, 256));
         auto bs = b.constant(Tensor::from_floats(f32, {4}, {0.01f, 0.02f, 0.005f, 0.03f}));
         auto bz = b.constant(Tensor::from_floats(u8, {4}, {0, 128, 255, 17}));
         auto y = b.op(OpKind::QLinearMatMul,
                       {a, sc(0.02f), b.constant(Tensor::from_floats(u8, {}, {128})), w, bs, bz,
                        sc(0.05f), b.constant(Tensor::from_floats(i8, {}, {-10}))});
         return b.cast(y, i32);
       }},
      // DynamicQuantMatMul (the quant_matmul pass's op): i8 weights with a per-tensor scale and
      // zero point; u8 weights with per-column scales and zero points.
      {"DynamicQuantMatMulI8",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const Sizes xs = s.size() > 1 ? s : Sizes{1, s[0]};
         auto w = b.constant(Tensor::random(i8, {xs.back(), 6}, 19, -128, 128));
         return b.op(OpKind::DynamicQuantMatMul,
                     {in(b, "x", t, xs), w, b.constant(Tensor::from_floats(f32, {}, {0.003f})),
                      b.constant(Tensor::from_floats(i8, {}, {-5}))});
       }},
      {"DynamicQuantMatMulU8PerColumn",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const Sizes xs = s.size() > 1 ? s : Sizes{1, s[0]};
         auto w = b.constant(Tensor::random(u8, {xs.back(), 3}, 23, 0, 256));
         return b.op(OpKind::DynamicQuantMatMul,
                     {in(b, "x", t, xs), w,
                      b.constant(Tensor::from_floats(f32, {3}, {0.01f, 0.002f, 0.03f})),
                      b.constant(Tensor::from_floats(u8, {3}, {0, 128, 255}))});
       }},
      // DynamicQuantConv: 1-D with pads, per-channel scales and zero points; 2-D grouped and
      // strided with one scale.
      {"DynamicQuantConv1d",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 1 ? s[0] : 1;
         auto w = b.constant(Tensor::random(i8, {3, 2, 3}, 29, -128, 128));
         return b.op(OpKind::DynamicQuantConv,
                     {in(b, "x", t, {n, 2, s.back()}), w,
                      b.constant(Tensor::from_floats(f32, {3}, {0.01f, 0.002f, 0.03f})),
                      b.constant(Tensor::from_floats(i8, {3}, {0, -7, 100}))},
                     {{"pads", std::vector<int64_t>{1, 1}}});
       }},
      {"DynamicQuantConv2dGroupedStrided",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t h = s.size() > 1 ? s[s.size() - 2] : 1;
         auto w = b.constant(Tensor::random(u8, {4, 1, 2, 2}, 31, 0, 256));
         return b.op(OpKind::DynamicQuantConv,
                     {in(b, "x", t, {1, 2, h + 1, s.back() + 1}), w,
                      b.constant(Tensor::from_floats(f32, {}, {0.004f}))},
                     {{"group", int64_t(2)}, {"strides", std::vector<int64_t>{1, 2}}});
       }},
      // ConvInteger: 1-D with pads and both zero points (w's per output channel), and 2-D
      // grouped and strided without zero points.
      {"ConvInteger1d",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t n = s.size() > 1 ? s[0] : 1;
         auto x = b.quantize_linear(in(b, "x", t, {n, 2, s.back()}),
                                    b.constant(Tensor::from_floats(f32, {}, {0.02f})),
                                    b.constant(Tensor::from_floats(u8, {}, {128})));
         auto w = b.constant(Tensor::random(i8, {3, 2, 3}, 17, -128, 128));
         return b.op(OpKind::ConvInteger,
                     {x, w, b.constant(Tensor::from_floats(u8, {}, {5})),
                      b.constant(Tensor::from_floats(i8, {3}, {0, -7, 100}))},
                     {{"pads", std::vector<int64_t>{1, 1}}});
       }},
      {"ConvInteger2dGroupedStrided",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t h = s.size() > 1 ? s[s.size() - 2] : 1;
         auto x = b.quantize_linear(in(b, "x", t, {1, 4, h, s.back()}),
                                    b.constant(Tensor::from_floats(f32, {}, {0.02f})),
                                    b.constant(Tensor::from_floats(i8, {}, {3})));
         auto w = b.constant(Tensor::random(i8, {4, 2, 1, 2}, 19, -128, 128));
         return b.op(OpKind::ConvInteger, {x, w},
                     {{"group", int64_t(2)},
                      {"strides", std::vector<int64_t>{1, 2}},
                      {"auto_pad", std::string("SAME_UPPER")}});
       }},
      // MatMulNBits: f32 a (other dtypes cast to it) by 5 columns of 4-bit codes in blocks of 16
      // with packed zero points (the last block partial where K is not a multiple of 16), and of
      // 8-bit codes in blocks of 32 with the default zero point.
      {"MatMulNBits4",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t K = s.back(), N = 5, bs = 16, blocks = (K + bs - 1) / bs;
         auto x = in(b, "x", t, s);
         return b.op(OpKind::MatMulNBits,
                     {t == f32 ? x : b.cast(x, f32),
                      b.constant(Tensor::random(u8, {N, blocks, bs / 2}, 31, 0, 256)),
                      b.constant(Tensor::random(f32, {N * blocks}, 32, 0.01, 0.1)),
                      b.constant(Tensor::random(u8, {N * ((blocks + 1) / 2)}, 33, 0, 256))},
                     {{"K", K}, {"N", N}, {"bits", int64_t(4)}, {"block_size", bs}});
       }},
      {"MatMulNBits8",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         const int64_t K = s.back(), N = 3, bs = 32, blocks = (K + bs - 1) / bs;
         auto x = in(b, "x", t, s);
         return b.op(OpKind::MatMulNBits,
                     {t == f32 ? x : b.cast(x, f32),
                      b.constant(Tensor::random(u8, {N, blocks, bs}, 34, 0, 256)),
                      b.constant(Tensor::random(f32, {N * blocks}, 35, 0.001, 0.01))},
                     {{"K", K}, {"N", N}, {"bits", int64_t(8)}, {"block_size", bs}});
       }},
      {"Host",
       [](GraphBuilder& b, DType t, const Sizes& s) {
         auto negate = [](Tensor& v) {
           for (int64_t i = 0; i < v.numel(); i++) v.set(i, -v.get(i));
         };
         return b.mul(b.host(b.mul(in(b, "x", t, s), 3.0), negate), 2.0);
       }},
  };
  return c;
}

}  // namespace testing

namespace {

using testing::OpCase;

std::vector<OpCase> cases() { return testing::op_conformance_cases(); }

class OpConformance : public ::testing::TestWithParam<std::tuple<int, DType, int>> {};

const std::vector<Sizes> kShapes = {{1}, {3}, {4097}, {2, 1, 3}, {3, 1}, {2, 3, 17}};

TEST_P(OpConformance, MatchesReference) {
  auto [ci, dt, si] = GetParam();
  OpCase c = cases()[size_t(ci)];
  Sizes s = kShapes[size_t(si)];
  GraphBuilder b;
  auto y = c.build(b, dt, s);
  b.output("y", y);
  Graph g = b.build();
  std::map<std::string, Tensor> inputs;
  uint64_t seed = 1;
  for (auto* v : g.inputs()) {
    inputs[v->name] = Tensor::random(v->dtype, static_sizes(v->shape), seed++, c.lo, c.hi);
  }
  // MatMul sums K products; its tolerance grows with K.
  double scale =
      c.name == "MatMul" || c.name.rfind("MatMulNBits", 0) == 0 ? 1 + double(s.back()) / 64 : 1;
  EXPECT_TRUE(testing::matches_reference(g, inputs, testing::eager_opts(), scale)) << "eager";
  EXPECT_TRUE(testing::matches_reference(g, inputs, testing::graph_opts(), scale)) << "graph";
}

std::string case_name(const ::testing::TestParamInfo<OpConformance::ParamType>& info) {
  auto [ci, dt, si] = info.param;
  std::string n = cases()[size_t(ci)].name + "_" + std::string(dtype_name(dt)) + "_" +
                  sizes_str(kShapes[size_t(si)]);
  std::string out;
  for (char ch : n) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpConformance,
                         ::testing::Combine(::testing::Range(0, int(cases().size())),
                                            ::testing::Values(f32, bf16, f16),
                                            ::testing::Range(0, int(kShapes.size()))),
                         case_name);

}  // namespace
}  // namespace ubfuse
