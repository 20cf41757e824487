// Eager binary kernels with numpy broadcasting, comparisons and Where against the reference
// (kernels_cpu_test.cc has the overview).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/op_kernel.h"
#include "kernels/reference/reference.h"
#include "kernels_cpu_util.h"
#include "test_util.h"
#include "ubfuse/builder.h"

namespace ubfuse::kernels_test {

using testing::throws_with;

// ---------------------------------------------------------------------------------------------
// Binary with broadcasting

struct ShapePair {
  Sizes a, b;
};

const std::vector<ShapePair> kBroadcasts = {
    {{1}, {1}},
    {{3}, {3}},
    {{4097}, {4097}},
    {{4097}, {1}},
    {{1}, {4097}},
    {{5, 4097}, {4097}},
    {{5, 4097}, {5, 1}},
    {{5, 1}, {5, 4097}},
    {{2, 3, 4}, {4}},
    {{2, 3, 4}, {3, 1}},
    {{2, 1, 4}, {1, 3, 1}},
    {{5, 1}, {1, 7}},
    {{2, 1, 3, 1}, {1, 4, 1, 5}},
    {{}, {3, 2}},
    {{3, 2}, {}},
    {{64, 1024}, {1024}},
    {{1, 3, 1}, {2, 3, 4097}},
};

void binary_broadcast_float() {
  using Fn = std::function<V(GraphBuilder&, V, V)>;
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"add", [](GraphBuilder& b, V x, V y) { return b.add(x, y); }},
      {"sub", [](GraphBuilder& b, V x, V y) { return b.sub(x, y); }},
      {"mul", [](GraphBuilder& b, V x, V y) { return b.mul(x, y); }},
      {"div", [](GraphBuilder& b, V x, V y) { return b.div(x, y); }},
      {"max", [](GraphBuilder& b, V x, V y) { return b.max(x, y); }},
      {"min", [](GraphBuilder& b, V x, V y) { return b.min(x, y); }},
      {"mod", [](GraphBuilder& b, V x, V y) { return b.mod(x, b.neg(y)); }},  // signs differ
      {"fmod", [](GraphBuilder& b, V x, V y) { return b.fmod(x, y); }},
      {"pow_tensor", [](GraphBuilder& b, V x, V y) { return b.pow_tensor(b.abs(x), y); }},
  };
  uint64_t seed = 100;
  for (auto& [name, fn] : ops) {
    auto& f = fn;  // clang 14 cannot capture a structured binding in a lambda
    for (DType dt : kFloats) {
      for (const auto& sp : kBroadcasts) {
        Tensor a = Tensor::random(dt, sp.a, seed++, -2, 2);
        Tensor bb = Tensor::random(dt, sp.b, seed++, 0.5, 2);  // keeps Div finite
        EXPECT_TRUE(
            check_op({a, bb}, [&](GraphBuilder& b, std::vector<V>& v) { return f(b, v[0], v[1]); }))
            << name << " " << dtype_name(dt) << " " << sizes_str(sp.a) << " x " << sizes_str(sp.b);
      }
    }
  }
}

TEST(KernelsCpu, BinaryMaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::from_floats(DType::f32, {3}, {nan, 1.0f, 2.0f});
  Tensor bb = Tensor::from_floats(DType::f32, {3}, {1.0f, nan, 3.0f});
  EXPECT_TRUE(
      check_op({a, bb}, [](GraphBuilder& b, std::vector<V>& v) { return b.max(v[0], v[1]); }));
  EXPECT_TRUE(
      check_op({a, bb}, [](GraphBuilder& b, std::vector<V>& v) { return b.min(v[0], v[1]); }));
}

TEST(KernelsCpu, BinaryInteger) {
  uint64_t seed = 300;
  for (DType dt : {DType::i32, DType::i64}) {
    for (const auto& sp : kBroadcasts) {
      Tensor a = Tensor::random(dt, sp.a, seed++, -50, 50);
      Tensor bb = Tensor::random(dt, sp.b, seed++, 1, 9);
      for (int op = 0; op < 6; ++op) {
        EXPECT_TRUE(check_op({a, bb},
                             [&](GraphBuilder& b, std::vector<V>& v) {
                               switch (op) {
                                 case 0:
                                   return b.add(v[0], v[1]);
                                 case 1:
                                   return b.sub(v[0], v[1]);
                                 case 2:
                                   return b.mul(v[0], v[1]);
                                 case 3:
                                   return b.div(v[0], v[1]);
                                 case 4:
                                   return b.max(v[0], v[1]);
                                 default:
                                   return b.min(v[0], v[1]);
                               }
                             }))
            << op << " " << dtype_name(dt) << " " << sizes_str(sp.a) << " x " << sizes_str(sp.b);
      }
    }
  }
}

// i32 and i64 sums, differences and products wrap modulo 2^bits (as ONNX's numpy reference does),
// whichever operand is a broadcast scalar. The double-precision reference cannot hold these
// values, so the wrapped results are computed here.
template <typename T>
void check_integer_wrap(DType dt) {
  using U = std::make_unsigned_t<T>;
  const T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  const std::vector<T> xs = {hi, lo, T(hi / 3 + 7), T(-5), T(1) << (sizeof(T) * 4)};
  const T s = T(T(1) << (sizeof(T) * 4)) + 3;  // squares past 2^bits
  auto tensor = [&](const std::vector<T>& v, Sizes sz) {
    Tensor t(dt, std::move(sz));
    std::memcpy(t.data(), v.data(), v.size() * sizeof(T));
    return t;
  };
  const int64_t n = int64_t(xs.size());
  for (int form = 0; form < 3; form++) {  // scalar b, scalar a, both full
    for (int op = 0; op < 3; op++) {
      GraphBuilder b;
      auto x = b.input("x", dt, {form == 1 ? 1 : n});
      auto y = b.input("y", dt, {form == 0 ? 1 : n});
      b.output("z", op == 0 ? b.add(x, y) : op == 1 ? b.sub(x, y) : b.mul(x, y));
      std::vector<T> yv(size_t(form == 0 ? 1 : n), s), xv = xs;
      if (form == 1) xv = {s};
      if (form == 2) yv = {xs.rbegin(), xs.rend()};
      Tensor z = compile(b.build(), testing::eager_opts())
                     .run({{"x", tensor(xv, {int64_t(xv.size())})},
                           {"y", tensor(yv, {int64_t(yv.size())})}})
                     .at("z");
      for (int64_t i = 0; i < n; i++) {
        const U u = U(xv[size_t(form == 1 ? 0 : i)]), v = U(yv[size_t(form == 0 ? 0 : i)]);
        const T want = T(op == 0 ? U(u + v) : op == 1 ? U(u - v) : U(u * v));
        EXPECT_EQ(z.data_as<T>()[i], want)
            << dtype_name(dt) << " op " << op << " form " << form << " element " << i;
      }
    }
  }
}

TEST(KernelsCpu, BinaryIntegerWrapsModuloTheWidth) {
  check_integer_wrap<int32_t>(DType::i32);
  check_integer_wrap<int64_t>(DType::i64);
}

TEST(KernelsCpu, BinaryIntegerModAndPow) {
  uint64_t seed = 400;
  for (DType dt : {DType::i32, DType::i64}) {
    for (const auto& sp : kBroadcasts) {
      Tensor a = Tensor::random(dt, sp.a, seed++, -50, 50);
      Tensor d = Tensor::random(dt, sp.b, seed++, 1, 9);
      Tensor small = Tensor::random(dt, sp.a, seed++, -6, 7);
      Tensor e = Tensor::random(dt, sp.b, seed++, -2, 8);
      const std::string where =
          std::string(dtype_name(dt)) + " " + sizes_str(sp.a) + " x " + sizes_str(sp.b);
      EXPECT_TRUE(check_op({a, d}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.mod(v[0], v[1]);
      })) << where;
      EXPECT_TRUE(check_op({a, d}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.mod(v[0], b.neg(v[1]));
      })) << where;
      EXPECT_TRUE(check_op({a, d}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.fmod(v[0], v[1]);
      })) << where;
      // Bases in [-6, 6] without 0 where the exponent may be negative.
      Tensor base = small.clone();
      for (int64_t i = 0; i < base.numel(); i++) {
        if (base.get(i) == 0) base.set(i, 5);
      }
      EXPECT_TRUE(check_op({base, e}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.pow_tensor(v[0], v[1]);
      })) << where;
    }
  }
}

TEST(KernelsCpu, IntegerDivisionByZeroIsAnError) {
  GraphBuilder b;
  V x = b.input("x", DType::i64, {3});
  V y = b.input("y", DType::i64, {3});
  V z = b.div(x, y);
  b.name_last("div_by_zero");
  b.output("z", z);
  Graph g = b.build();
  Tensor tx = Tensor::from_floats(DType::i64, {3}, {1, 2, 3});
  Tensor ty = Tensor::from_floats(DType::i64, {3}, {1, 0, 3});
  Tensor out(DType::i64, {3});
  std::vector<Tensor> outs{out};
  auto k = cpu::make_op_kernel(*z->producer);
  EXPECT_TRUE(throws_with(
      [&] {
        k->run({tx, ty}, outs, pool2());
      },
      {"div_by_zero", "Div", "division by zero"}));
}

void compare_and_where() {
  uint64_t seed = 500;
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::i64, DType::i32}) {
    for (const auto& sp : kBroadcasts) {
      // Few distinct values so Equal is true sometimes.
      Tensor a = Tensor::random(dt, sp.a, seed++, -2, 3);
      Tensor bb = Tensor::random(dt, sp.b, seed++, -2, 3);
      if (is_float(dt)) {
        for (int64_t i = 0; i < a.numel(); ++i) a.set(i, std::round(a.get(i)));
        for (int64_t i = 0; i < bb.numel(); ++i) bb.set(i, std::round(bb.get(i)));
      }
      for (int op = 0; op < 3; ++op) {
        EXPECT_TRUE(check_op({a, bb},
                             [&](GraphBuilder& b, std::vector<V>& v) {
                               return op == 0   ? b.equal(v[0], v[1])
                                      : op == 1 ? b.less(v[0], v[1])
                                                : b.greater(v[0], v[1]);
                             }))
            << op << " " << dtype_name(dt) << " " << sizes_str(sp.a) << " x " << sizes_str(sp.b);
      }
      Tensor c = Tensor::random(DType::boolean, sp.a, seed++, 0, 2);
      EXPECT_TRUE(
          check_op({c, a, bb},
                   [&](GraphBuilder& b, std::vector<V>& v) { return b.where(v[0], v[1], v[2]); }))
          << "where " << dtype_name(dt) << " " << sizes_str(sp.a) << " x " << sizes_str(sp.b);
      Tensor c2 = Tensor::random(DType::boolean, sp.b, seed++, 0, 2);
      EXPECT_TRUE(
          check_op({c2, bb, a},
                   [&](GraphBuilder& b, std::vector<V>& v) { return b.where(v[0], v[1], v[2]); }))
          << "where " << dtype_name(dt) << " " << sizes_str(sp.b) << " x " << sizes_str(sp.a);
    }
  }
}

}  // namespace ubfuse::kernels_test
