// DFT and STFT (src/import/onnx/ops_spectral.cc) against their definitions in double: real and
// complex signals, odd lengths, dft_length cutting and padding (given at import and at run time),
// a symbolic signal length, onesided, the inverse, negative axes, f16, windows; MelWeightMatrix
// against ONNX's reference; and the errors.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "onnx_one_node.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::kFloat;
using testing::kInt64;
using testing::OneNode;
using testing::throws_with;

constexpr int kFloat16 = onnx::TensorProto::FLOAT16;

// X[k] = sum over t < min(n, L) of x[t] e^(-+2 pi i k t / L) (divided by L for the inverse),
// along `axis` of x [..., n, ..., parts]; returns [..., bins, ..., 2] and its sizes in `out`.
std::vector<double> dft_ref(const Tensor& x, int64_t axis, int64_t L, bool onesided, bool inverse,
                            Sizes* out) {
  const Sizes s = x.sizes();
  const int64_t r = int64_t(s.size()), parts = s[size_t(r - 1)], n = s[size_t(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; i++) outer *= s[size_t(i)];
  for (int64_t i = axis + 1; i < r - 1; i++) inner *= s[size_t(i)];
  const int64_t bins = onesided ? L / 2 + 1 : L;
  *out = s;
  (*out)[size_t(axis)] = bins;
  (*out)[size_t(r - 1)] = 2;
  std::vector<double> y(size_t(outer * bins * inner * 2), 0.0);
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t k = 0; k < bins; k++) {
        double re = 0, im = 0;
        for (int64_t t = 0; t < std::min(n, L); t++) {
          const int64_t at = ((o * n + t) * inner + i) * parts;
          const double xr = x.get(at), xi = parts == 2 ? x.get(at + 1) : 0.0;
          const double th = 2 * M_PI * double(k * t % L) / double(L);
          re += xr * std::cos(th) - sign * xi * std::sin(th);
          im += xi * std::cos(th) + sign * xr * std::sin(th);
        }
        const double scale = inverse ? 1.0 / double(L) : 1.0;
        const size_t at = size_t(((o * bins + k) * inner + i) * 2);
        y[at] = re * scale;
        y[at + 1] = im * scale;
      }
    }
  }
  return y;
}

void expect_close(const Tensor& got, const std::vector<double>& want, const Sizes& sizes,
                  double tol) {
  ASSERT_EQ(got.sizes(), sizes);
  for (int64_t i = 0; i < got.numel(); i++) {
    ASSERT_NEAR(got.get(i), want[size_t(i)], tol * (1 + std::fabs(want[size_t(i)]))) << i;
  }
}

const std::vector<Options> kModes = {testing::eager_opts(), testing::graph_opts()};

TEST(OnnxSpectral, DftRealOddLengthOnesidedCutAndPadded) {
  // [2, 7, 3, 1] along axis 1: the whole signal, cut to 5 and padded to 9, one- and two-sided.
  const Tensor x = Tensor::random(f32, {2, 7, 3, 1}, 11);
  for (int64_t L : {int64_t(0), int64_t(5), int64_t(9)}) {
    for (bool onesided : {false, true}) {
      OneNode n("DFT", 17);
      n.input("x", kFloat, {2, 7, 3, 1});
      if (L > 0) n.ints("len", {}, {L});
      Graph g = n.attr("axis", 1).attr("onesided", int64_t(onesided)).output("y", kFloat).import();
      Sizes out;
      const auto want = dft_ref(x, 1, L > 0 ? L : 7, onesided, false, &out);
      for (const Options& o : kModes) {
        SCOPED_TRACE("L " + std::to_string(L) + " onesided " + std::to_string(onesided));
        expect_close(compile(g, o).run({{"x", x}}).at("y"), want, out, 1e-5);
      }
    }
  }
}

TEST(OnnxSpectral, DftComplexForwardAndInverseAlongANegativeAxis) {
  const Tensor x = Tensor::random(f32, {6, 4, 2}, 12);
  for (bool inverse : {false, true}) {
    Graph g = OneNode("DFT", 17)
                  .input("x", kFloat, {6, 4, 2})
                  .attr("axis", -3)
                  .attr("inverse", int64_t(inverse))
                  .output("y", kFloat)
                  .import();
    Sizes out;
    const auto want = dft_ref(x, 0, 6, false, inverse, &out);
    for (const Options& o : kModes)
      expect_close(compile(g, o).run({{"x", x}}).at("y"), want, out, 1e-5);
  }
  // The inverse of the forward transform is the signal.
  Graph fwd = OneNode("DFT", 17).input("x", kFloat, {1, 13, 2}).output("y", kFloat).import();
  Graph inv = OneNode("DFT", 17)
                  .input("x", kFloat, {1, 13, 2})
                  .attr("inverse", int64_t(1))
                  .output("y", kFloat)
                  .import();
  const Tensor s = Tensor::random(f32, {1, 13, 2}, 13);
  for (const Options& o : kModes) {
    Tensor back = compile(inv, o).run({{"x", compile(fwd, o).run({{"x", s}}).at("y")}}).at("y");
    for (int64_t i = 0; i < s.numel(); i++) EXPECT_NEAR(back.get(i), s.get(i), 1e-5) << i;
  }
}

TEST(OnnxSpectral, DftLengthAtRunTimeAndASymbolicSignal) {
  // dft_length a graph input and the signal's length symbolic: one compiled model, several runs.
  Graph g = OneNode("DFT", 17)
                .input("x", kFloat, {1, -1, 1})
                .input("len", kInt64, {})
                .attr("onesided", int64_t(1))
                .output("y", kFloat)
                .import();
  for (const Options& o : kModes) {
    CompiledModel m = compile(g, o);
    for (auto [n, L] : {std::pair<int64_t, int64_t>{11, 11}, {11, 6}, {4, 15}, {1, 1}}) {
      const Tensor x = Tensor::random(f32, {1, n, 1}, uint64_t(20 + n));
      Sizes out;
      const auto want = dft_ref(x, 1, L, true, false, &out);
      SCOPED_TRACE("n " + std::to_string(n) + " L " + std::to_string(L));
      expect_close(m.run({{"x", x}, {"len", Tensor::from_floats(i64, {}, {float(L)})}}).at("y"),
                   want, out, 1e-5);
    }
  }
}

TEST(OnnxSpectral, DftInFloat16) {
  const Tensor x = Tensor::random(DType::f16, {3, 10, 1}, 14);
  Graph g = OneNode("DFT", 17).input("x", kFloat16, {3, 10, 1}).output("y", kFloat16).import();
  Sizes out;
  const auto want = dft_ref(x, 1, 10, false, false, &out);
  for (const Options& o : kModes) {
    Tensor y = compile(g, o).run({{"x", x}}).at("y");
    EXPECT_EQ(y.dtype(), DType::f16);
    expect_close(y, want, out, 1e-2);
  }
}

// STFT by its definition: frames of the signal at multiples of the step, times the window,
// each frame's DFT of length frame_length.
std::vector<double> stft_ref(const Tensor& x, int64_t step, const std::vector<double>& window,
                             bool onesided, Sizes* out) {
  const int64_t b = x.dim(0), len = x.dim(1), parts = x.dim(2), fl = int64_t(window.size());
  const int64_t frames = 1 + (len - fl) / step, bins = onesided ? fl / 2 + 1 : fl;
  Tensor f(DType::f32, {b * frames, fl, parts});
  for (int64_t i = 0; i < b; i++) {
    for (int64_t m = 0; m < frames; m++) {
      for (int64_t t = 0; t < fl; t++) {
        for (int64_t p = 0; p < parts; p++) {
          const double v = x.get((i * len + m * step + t) * parts + p) * window[size_t(t)];
          static_cast<float*>(f.data())[((i * frames + m) * fl + t) * parts + p] = float(v);
        }
      }
    }
  }
  Sizes s;
  auto y = dft_ref(f, 1, fl, onesided, false, &s);
  *out = {b, frames, bins, 2};
  return y;
}

TEST(OnnxSpectral, StftWithAWindowAndComplexTwoSided) {
  const Tensor x = Tensor::random(f32, {2, 50, 1}, 15);
  const Tensor w = Tensor::random(f32, {16}, 16);
  std::vector<double> wv;
  for (int64_t i = 0; i < 16; i++) wv.push_back(w.get(i));
  Graph g = OneNode("STFT", 17)
                .input("x", kFloat, {2, 50, 1})
                .ints("step", {}, {6})
                .input("w", kFloat, {16})
                .output("y", kFloat)
                .import();
  Sizes out;
  const auto want = stft_ref(x, 6, wv, true, &out);  // 1 + (50 - 16) / 6 = 6 frames of 9 bins
  EXPECT_EQ(out, (Sizes{2, 6, 9, 2}));
  for (const Options& o : kModes) {
    expect_close(compile(g, o).run({{"x", x}, {"w", w}}).at("y"), want, out, 1e-5);
  }
  // A complex signal, frame_length without a window (all ones), two-sided; the length symbolic.
  Graph c = OneNode("STFT", 17)
                .input("x", kFloat, {1, -1, 2})
                .ints("step", {1}, {3})
                .skip()
                .ints("fl", {}, {7})
                .attr("onesided", int64_t(0))
                .output("y", kFloat)
                .import();
  for (const Options& o : kModes) {
    CompiledModel m = compile(c, o);
    for (int64_t len : {int64_t(7), int64_t(23)}) {
      const Tensor xc = Tensor::random(f32, {1, len, 2}, uint64_t(17 + len));
      const auto wantc = stft_ref(xc, 3, std::vector<double>(7, 1.0), false, &out);
      expect_close(m.run({{"x", xc}}).at("y"), wantc, out, 1e-5);
    }
    // Shorter than a frame: no frames, 1 + floor((5 - 7) / 3) = 0 (truncating, 1 + 0 would read
    // past the signal), an empty output.
    for (int64_t len : {int64_t(2), int64_t(5)}) {
      Tensor none = m.run({{"x", Tensor::random(f32, {1, len, 2}, 30)}}).at("y");
      EXPECT_EQ(none.sizes(), (Sizes{1, 0, 7, 2})) << len;
    }
  }
}

Graph mel_model(float mels, float dft, float rate, float lo, float hi) {
  return OneNode("MelWeightMatrix", 17)
      .init("mels", testing::kInt32, {}, {mels})
      .init("dft", testing::kInt32, {}, {dft})
      .init("rate", testing::kInt32, {}, {rate})
      .init("lo", kFloat, {}, {lo})
      .init("hi", kFloat, {}, {hi})
      .output("w", kFloat)
      .import();
}

// The filters become a constant at import, equal to ONNX's reference (numpy, the edges by its
// floor division): ONNX's test case entry by entry, and fingerprints of two front ends' filters
// from the reference (sum, count of non-zeros, sum of value x flat position, four entries).
TEST(OnnxSpectral, MelWeightMatrixOfConstantsIsTheReferences) {
  const std::vector<std::vector<float>> onnx_case = {
      {1, 1, 0, 0, 0, 0, 0, 0}, {0, 0, 1, 1, 0, 0, 0, 0}, {0, 0, 0, 0, 1, 0, 0, 0},
      {0, 0, 0, 0, 0, 1, 0, 0}, {0, 0, 0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 0, 0, 0, 1},
      {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}};
  Graph g = mel_model(8, 16, 8192, 0, 4096);
  for (const Options& o : kModes) {
    CompiledModel m = compile(g, o);
    EXPECT_EQ(m.kernels().size(), 0u);  // a constant output
    Tensor w = m.run({}).at("w");
    ASSERT_EQ(w.sizes(), (Sizes{9, 8}));
    for (int64_t j = 0; j < 9; j++) {
      for (int64_t i = 0; i < 8; i++) EXPECT_EQ(w.get(j * 8 + i), onnx_case[size_t(j)][size_t(i)]);
    }
  }
  struct Case {
    float mels, dft, rate, lo, hi;
    double sum;
    int nonzero;
    double weighted;
    std::vector<std::tuple<int64_t, int64_t, double>> at;
  };
  const Case cases[] = {{80,
                         400,
                         16000,
                         0,
                         8000,
                         195.500001,
                         311,
                         1456579.68,
                         {{0, 0, 1}, {1, 1, 1}, {103, 62, 0.75}, {192, 79, 1.0 / 6}}},
                        {40,
                         512,
                         16000,
                         125,
                         3800,
                         108.500001,
                         177,
                         257719.836,
                         {{5, 0, 1}, {6, 1, 1}, {63, 29, 0.25}, {115, 39, 1.0 / 6}}}};
  for (const Case& k : cases) {
    Tensor w = compile(mel_model(k.mels, k.dft, k.rate, k.lo, k.hi), testing::eager_opts())
                   .run({})
                   .at("w");
    const int64_t cols = int64_t(k.mels);
    ASSERT_EQ(w.sizes(), (Sizes{int64_t(k.dft) / 2 + 1, cols}));
    double sum = 0, weighted = 0;
    int nonzero = 0;
    for (int64_t i = 0; i < w.numel(); i++) {
      sum += w.get(i);
      weighted += w.get(i) * double(i);
      nonzero += w.get(i) != 0;
    }
    EXPECT_NEAR(sum, k.sum, 1e-5) << k.dft;
    EXPECT_EQ(nonzero, k.nonzero) << k.dft;
    EXPECT_NEAR(weighted, k.weighted, 1e-2) << k.dft;
    for (auto [j, i, v] : k.at) EXPECT_NEAR(w.get(j * cols + i), v, 1e-7) << j << "," << i;
  }
}

TEST(OnnxSpectral, ErrorsNameNodeOpAndValue) {
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("DFT", 17).input("x", kFloat, {4, 2}).output("y", kFloat).import();
      },
      {"node0", "DFT", "axis must name a dim of the signal", "1 for the shape [4,2]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("DFT", 17).input("x", kFloat, {1, 4, 3}).output("y", kFloat).import();
      },
      {"node0", "DFT", "input must end in a dim of 1 (real) or 2", "[1,4,3]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("DFT", 17)
            .input("x", kFloat, {1, 4, 2})
            .attr("onesided", int64_t(1))
            .output("y", kFloat)
            .import();
      },
      {"node0", "DFT", "onesided needs a real input"}));
  for (int64_t len : {int64_t(0), int64_t(790273982471)}) {  // fuzz_onnx's: 0xb800000007
    EXPECT_TRUE(throws_with(
        [len] {
          OneNode("DFT", 17)
              .input("x", kFloat, {2, 5, 2})
              .ints("len", {}, {len})
              .output("y", kFloat)
              .import();
        },
        {"node0", "DFT",
         len == 0 ? "the DFT length must be at least 1, got 0"
                  : "a DFT of length 790273982471 over 5 samples: its basis of 5 x 790273982471 "
                    "values is past the direct DFT's 67108864"}));
  }
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("STFT", 17)
            .input("x", kFloat, {1, 40, 1})
            .ints("step", {}, {4})
            .input("w", kFloat, {8})
            .ints("fl", {}, {10})
            .output("y", kFloat)
            .import();
      },
      {"node0", "STFT", "window has 8 values but frame_length is 10"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("STFT", 17)
            .input("x", kFloat, {1, 40, 1})
            .ints("step", {}, {4})
            .output("y", kFloat)
            .import();
      },
      {"node0", "STFT", "needs a window or a frame_length"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("STFT", 17)
            .input("x", kFloat, {1, 40, 1})
            .ints("step", {2}, {4, 4})
            .ints("fl", {}, {8})
            .output("y", kFloat)
            .import();
      },
      {"node0", "STFT", "frame_step must be a scalar, got the shape [2]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("MelWeightMatrix", 17)
            .input("mels", testing::kInt32, {})
            .init("dft", testing::kInt32, {}, {16})
            .init("rate", testing::kInt32, {}, {8192})
            .init("lo", kFloat, {}, {0})
            .init("hi", kFloat, {}, {4096})
            .output("w", kFloat)
            .import();
      },
      {"node0", "MelWeightMatrix", "num_mel_bins given at run time", "must be constants"}));
  // fuzz_onnx's: 67108864 mel bins (a constant of 9 x 2^26 values).
  EXPECT_TRUE(
      throws_with([] { mel_model(67108864, 16, 8000, 20, 3000); },
                  {"node0", "MelWeightMatrix", "a mel weight matrix of 9 x 67108864 values"}));
  // 9000 Hz at 8192 samples per second lies past the spectrogram's 9 bins: the last edge is bin 10.
  EXPECT_TRUE(
      throws_with([] { mel_model(8, 16, 8192, 0, 9000); },
                  {"node0", "MelWeightMatrix", "mel edge 8 reaches spectrogram bin 10 of 9"}));
  // fuzz_onnx's: an upper edge of 6.5e37 Hz, whose edges (1e19 bins and more) had been cast to
  // int64 beyond its range (UBSan).
  EXPECT_TRUE(throws_with([] { mel_model(516, 8208, 8000, 20, 6.5e37f); },
                          {"node0", "MelWeightMatrix", "mel edge", "of 4105", "upper_edge_hertz"}));
}

}  // namespace
}  // namespace ubfuse
