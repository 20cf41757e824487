// Dims as integer polynomials: canonical forms, parsing, arithmetic, evaluation, the solver, the
// shape inference they make exact (Concat, Slice, Reshape along symbolic axes), and a KV-cache
// style Concat compiled once and run at several lengths.
#include <array>
#include <limits>

#include "plan/plan.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::throws_with;

Dim D(const char* s) { return Dim(s); }

TEST(Dim, CanonicalFormsCompareEqual) {
  EXPECT_EQ(D("x+y"), D("y+x"));
  EXPECT_EQ(D("y+x").str(), "x+y");
  EXPECT_EQ(Dim::sub(Dim::mul(2, "x"), "x"), D("x"));
  Dim zero = Dim::sub("x", "x");
  ASSERT_TRUE(zero.is_static());
  EXPECT_EQ(zero.value(), 0);
  EXPECT_EQ(D("seq - seq"), Dim(int64_t(0)));
  EXPECT_EQ(D(" 1 + 2 * seq ").str(), "2*seq+1");
  EXPECT_EQ(D("seq*batch").str(), "batch*seq");
  EXPECT_EQ(D("a*2*a").str(), "2*a*a");
  EXPECT_EQ(D("1+a+c*b").str(), "b*c+a+1");  // highest degree first, the constant last
  EXPECT_EQ(D("4-x").str(), "-x+4");
  EXPECT_EQ(D("seq-1").str(), "seq-1");
  EXPECT_EQ(D("x+x+x").str(), "3*x");
  EXPECT_EQ(D("2*3*x").str(), "6*x");
  EXPECT_EQ(D("0*x+5"), Dim(5));
  EXPECT_NE(D("past+seq"), D("past+seq+1"));
  // Constants are static dims, whatever their spelling.
  for (const char* s : {"5", "2*3-1", " 5 ", "x-x+5"}) {
    ASSERT_TRUE(D(s).is_static()) << s;
    EXPECT_EQ(D(s).value(), 5) << s;
  }
  EXPECT_EQ(D("-3"), Dim(-3));
}

TEST(Dim, ProductsOfSumsAreExpanded) {
  EXPECT_EQ(Dim::mul("a+b", "c").str(), "a*c+b*c");
  EXPECT_EQ(Dim::mul("a+1", "a-1").str(), "a*a-1");
  EXPECT_EQ(Dim::mul("past+seq", 8).str(), "8*past+8*seq");
  EXPECT_EQ(Dim::mul("a+b", "a+b"), D("a*a+2*a*b+b*b"));
  EXPECT_EQ(Dim::mul(1, "seq"), D("seq"));
  EXPECT_EQ(Dim::mul(int64_t(0), "seq"), Dim(int64_t(0)));
  EXPECT_EQ(Dim::mul(6, 7), Dim(42));
}

TEST(Dim, SymbolsTermsAndLoneSymbols) {
  EXPECT_TRUE(D("seq").is_symbol());
  EXPECT_TRUE(D("$reshape0.out.1").is_symbol());
  EXPECT_TRUE(D("batch_size:0").is_symbol());
  EXPECT_TRUE(D("2x").is_symbol());  // a name may start with a digit
  for (const char* s : {"seq+1", "2*seq", "a*b", "-seq"}) EXPECT_FALSE(D(s).is_symbol()) << s;
  EXPECT_FALSE(Dim(3).is_symbol());
  EXPECT_EQ(D("b*s+a*a+s+3").symbols(), (std::vector<std::string>{"a", "b", "s"}));
  EXPECT_TRUE(Dim(4).symbols().empty());
  auto t = D("2*seq-b*b+1").terms();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].coef, -1);
  EXPECT_EQ(t[0].factors, (std::vector<std::string>{"b", "b"}));
  EXPECT_EQ(t[1].coef, 2);
  EXPECT_EQ(t[1].factors, (std::vector<std::string>{"seq"}));
  EXPECT_EQ(t[2].coef, 1);
  EXPECT_TRUE(t[2].factors.empty());
  EXPECT_TRUE(Dim(int64_t(0)).terms().empty());
}

TEST(Dim, PrintedFormsParseBack) {
  for (const char* s : {"seq", "past+seq", "2*seq+1", "batch*seq", "seq-1", "-seq+4", "8*b",
                        "a*a*b-3*a+7", "$n.out.0+n:1", "-x-y-1", "9223372036854775807*x"}) {
    Dim d(s);
    EXPECT_EQ(Dim(d.str()), d) << s;
    EXPECT_EQ(Dim(d.str()).str(), d.str()) << s;
  }
  EXPECT_EQ(D("-x-y-1").str(), "-x-y-1");
}

TEST(Dim, InvalidStringsAreRejected) {
  for (const char* s : {"", "   ", "a b", "a+", "+a", "a**b", "a/2", "(a)", "a--b", "a+-1", "*a",
                        "seq-", "a,b", "99999999999999999999"}) {
    EXPECT_TRUE(throws_with([&] { Dim d(s); }, {"invalid dim '" + std::string(s) + "'"})) << s;
  }
  EXPECT_TRUE(throws_with([] { Dim d("99999999999*99999999999*x"); }, {"overflows 64 bits"}));
  EXPECT_TRUE(throws_with([] { Dim d("a b"); }, {"invalid dim 'a b'", "expected '+', '-' or '*'",
                                                 "position 2", "hint", "\"past+seq\""}));
  EXPECT_TRUE(throws_with([] { Dim d("a/2"); }, {"at '/'"}));
  EXPECT_TRUE(throws_with([] { Dim d(""); }, {"empty"}));
}

TEST(Dim, ArithmeticOverflowThrows) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(throws_with([] { Dim::mul(Dim(kMax), 2); }, {"overflows 64 bits"}));
  EXPECT_TRUE(throws_with([] { Dim::add(Dim(kMax), 1); }, {"overflows 64 bits"}));
  EXPECT_TRUE(throws_with([] { Dim::add("9223372036854775807*x", "x"); }, {"overflows"}));
  EXPECT_TRUE(throws_with([] { Dim::mul("4611686018427387904*x", 2); }, {"overflows"}));
  // 16 symbols, cubed: 816 terms, past what a shape may carry.
  Dim s("a+b+c+d+e+f+g+h+i+j+k+l+m+n+o+p");
  Dim sq = Dim::mul(s, s);
  EXPECT_EQ(sq.terms().size(), 136u);
  EXPECT_TRUE(throws_with([&] { Dim::mul(sq, s); }, {"more than 256 terms"}));
}

TEST(Dim, FloorDivision) {
  EXPECT_EQ(Dim::floordiv("2*n", 2), D("n"));
  EXPECT_EQ(Dim::floordiv("2*n+1", 2), D("n"));
  EXPECT_EQ(Dim::floordiv("2*n-1", 2), D("n-1"));
  EXPECT_EQ(Dim::floordiv("6*a*b+4*c+3", 2), D("3*a*b+2*c+1"));
  EXPECT_EQ(Dim::floordiv("n", 2), std::nullopt);
  EXPECT_EQ(Dim::floordiv("2*n+m", 2), std::nullopt);
  EXPECT_EQ(Dim::floordiv(Dim(7), 2), Dim(3));
  EXPECT_EQ(Dim::floordiv(Dim(-7), 2), Dim(-4));
  EXPECT_EQ(Dim::floordiv("n", 1), D("n"));
  // Exact for every integer value of the symbol, negative ones included.
  for (const char* s : {"4*n+3", "4*n-3", "8*n+0", "-4*n+5"}) {
    Dim q = *Dim::floordiv(s, 4);
    for (int64_t n = -9; n <= 9; n++) {
      int64_t a = *eval_dim(s, {{"n", n}});
      int64_t want = a / 4 - (a % 4 != 0 && a < 0 ? 1 : 0);
      EXPECT_EQ(*eval_dim(q, {{"n", n}}), want) << s << " n=" << n;
    }
  }
  EXPECT_TRUE(throws_with([] { Dim::floordiv("n", 0); }, {"'n' by 0", "must be positive"}));
  EXPECT_TRUE(throws_with([] { Dim::floordiv("n", -2); }, {"must be positive"}));
}

TEST(Dim, ExactPolynomialDivision) {
  EXPECT_EQ(Dim::div_exact("8*b", 8), D("b"));
  EXPECT_EQ(Dim::div_exact("512*b*past+512*b*seq", "b*past+b*seq"), Dim(512));
  EXPECT_EQ(Dim::div_exact("a*a-1", "a+1"), D("a-1"));
  EXPECT_EQ(Dim::div_exact("a*a-1", "a-1"), D("a+1"));
  EXPECT_EQ(Dim::div_exact(Dim::mul("x+2*y", "x*y-3"), "x*y-3"), D("x+2*y"));
  EXPECT_EQ(Dim::div_exact("a*a+1", "a+1"), std::nullopt);
  EXPECT_EQ(Dim::div_exact("a", "a*b"), std::nullopt);
  EXPECT_EQ(Dim::div_exact("3*a", 2), std::nullopt);
  EXPECT_EQ(Dim::div_exact(6, 4), std::nullopt);
  EXPECT_EQ(Dim::div_exact(6, 3), Dim(2));
  EXPECT_EQ(Dim::div_exact("x", int64_t(0)), std::nullopt);
  EXPECT_EQ(Dim::div_exact(int64_t(0), "x"), Dim(int64_t(0)));
  EXPECT_EQ(Dim::div_exact("past+seq", "seq+past"), Dim(1));
}

TEST(Dim, Evaluation) {
  SymbolBindings b{{"past", 3}, {"seq", 4}, {"batch", 2}};
  EXPECT_EQ(eval_dim("past+seq", b), 7);
  EXPECT_EQ(eval_dim("2*seq-1", b), 7);
  EXPECT_EQ(eval_dim("batch*seq*seq-past", b), 29);
  EXPECT_EQ(eval_dim(Dim(12), b), 12);
  EXPECT_EQ(eval_dim("seq-5", b), -1);  // eval_dim is arithmetic; sizes are checked by callers
  EXPECT_EQ(eval_dim("past+heads", b), std::nullopt);
  EXPECT_EQ(eval_shape({"batch", "past+seq", 64}, b), (Sizes{2, 7, 64}));
  EXPECT_TRUE(throws_with([&] { eval_shape({"seq-5"}, b); },
                          {"dim 'seq-5'", "is -1 with seq=4", "cannot be negative"}));
  EXPECT_TRUE(throws_with(
      [&] {
        eval_shape({2, "past+heads"}, b);
      },
      {"symbol 'heads'", "'heads+past'", "[2,heads+past]", "not bound"}));
}

TEST(Dim, EvaluationOverflowNamesTheSymbols) {
  int64_t big = int64_t(1) << 40;
  EXPECT_TRUE(throws_with(
      [&] {
        eval_dim("a*b", {{"a", big}, {"b", big}});
      },
      {"dim 'a*b' overflows a 64-bit size", "a=1099511627776", "b=1099511627776", "hint"}));
  int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(throws_with(
      [&] {
        eval_dim("x+y", {{"x", max}, {"y", 1}});
      },
      {"dim 'x+y' overflows", "x=9223372036854775807", "y=1"}));
  EXPECT_TRUE(throws_with([&] { eval_dim("4*x", {{"x", max / 2}}); }, {"overflows"}));
}

TEST(Dim, SolverBindsTheOneLinearUnknown) {
  auto sol = solve_dim("past+seq", 12, {{"seq", 5}});
  ASSERT_TRUE(sol);
  EXPECT_EQ(sol->symbol, "past");
  EXPECT_EQ(sol->value, 7);
  sol = solve_dim("2*seq+1", 9, {});
  ASSERT_TRUE(sol);
  EXPECT_EQ(sol->symbol, "seq");
  EXPECT_EQ(sol->value, 4);
  sol = solve_dim("-x+10", 4, {});
  ASSERT_TRUE(sol);
  EXPECT_EQ(sol->value, 6);
  sol = solve_dim("3*x+b*y-2", 10, {{"b", 2}, {"y", 3}});
  ASSERT_TRUE(sol);
  EXPECT_EQ(sol->symbol, "x");
  EXPECT_EQ(sol->value, 2);
  sol = solve_dim("seq", 0, {});
  ASSERT_TRUE(sol);
  EXPECT_EQ(sol->value, 0);

  std::string why;
  EXPECT_FALSE(solve_dim("2*seq+1", 10, {}, &why));
  EXPECT_NE(why.find("not a multiple of 2"), std::string::npos) << why;
  EXPECT_FALSE(solve_dim("seq+5", 3, {}, &why));
  EXPECT_NE(why.find("seq=-2, below 0"), std::string::npos) << why;
  EXPECT_FALSE(solve_dim("batch*seq", 12, {{"batch", 3}}, &why));
  EXPECT_NE(why.find("'seq' appears in a product"), std::string::npos) << why;
  EXPECT_FALSE(solve_dim("seq*seq", 16, {}, &why));
  EXPECT_NE(why.find("product"), std::string::npos) << why;
  EXPECT_FALSE(solve_dim("a+b", 5, {}, &why));
  EXPECT_NE(why.find("'a', 'b' are all unbound"), std::string::npos) << why;
  EXPECT_FALSE(solve_dim("a+b", 5, {{"a", 1}, {"b", 4}}, &why));
  EXPECT_NE(why.find("bound already"), std::string::npos) << why;
  EXPECT_FALSE(solve_dim(Dim(5), 5, {}, &why));
  EXPECT_NE(why.find("fixed size"), std::string::npos) << why;
}

// ---- shape inference

TEST(DimShapes, ConcatAlongSymbolicAxes) {
  GraphBuilder b;
  auto past = b.input("past_key", f32, {"b", "h", "past", 64});
  auto key = b.input("key", f32, {"b", "h", "seq", 64});
  EXPECT_EQ(shape_str(b.concat({past, key}, 2)->shape), "[b,h,past+seq,64]");
  EXPECT_EQ(shape_str(b.concat({key, past}, -2)->shape), "[b,h,past+seq,64]");
  EXPECT_EQ(shape_str(b.concat({key, key}, 2)->shape), "[b,h,2*seq,64]");
  auto one = b.input("one", f32, {"b", "h", 1, 64});
  EXPECT_EQ(shape_str(b.concat({past, one, key}, 2)->shape), "[b,h,past+seq+1,64]");
  // The non-concatenated dims must still be equal.
  auto other = b.input("other", f32, {"b", "h2", "seq", 64});
  EXPECT_TRUE(throws_with([&] { b.concat({past, other}, 2); }, {"differ in dim 1"}));
}

TEST(DimShapes, SlicesWhoseLengthFollowsTheDim) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"b", "seq", 8});
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  auto len = [&](Value* v, int64_t s, int64_t e, int64_t step = 1) {
    return b.slice(v, {s}, {e}, {1}, {step})->shape[1].str();
  };
  EXPECT_EQ(len(x, 1, kEnd), "seq-1");  // x[1:]
  EXPECT_EQ(len(x, 0, -1), "seq-1");    // x[:-1]
  EXPECT_EQ(len(x, 2, -3), "seq-5");    // x[2:-3]
  EXPECT_EQ(len(x, 0, kEnd), "seq");    // x[:]
  constexpr int64_t kBegin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(len(x, -1, kBegin, -1), "seq");    // x[::-1]
  EXPECT_EQ(len(x, kEnd, kBegin, -1), "seq");  // the same, as exporters write it
  EXPECT_EQ(len(x, -2, kBegin, -1), "seq-1");  // x[-2::-1]
  EXPECT_EQ(len(x, -1, 0, -1), "seq-1");       // x[:0:-1]
  auto y = b.concat({x, x}, 1);                // [b, 2*seq, 8]
  EXPECT_EQ(len(y, 0, kEnd, 2), "seq");        // x[::2] of 2*seq
  EXPECT_EQ(len(y, 1, kEnd, 2), "seq");        // x[1::2]: ceil((2*seq-1)/2)
  EXPECT_EQ(len(y, 0, -1, 2), "seq");          // x[:-1:2]
  auto z = b.concat({x, x, x}, 1);             // [b, 3*seq, 8]
  EXPECT_EQ(len(z, 3, kEnd, 3), "seq-1");
  // Not polynomials: min(n, seq) (x[0:4], x[-1:], x[-3:-1]), a step that does not divide, an
  // empty range: run-time dims that each plan binds from the sizes it runs at.
  for (const auto& r : std::vector<std::array<int64_t, 3>>{
           {0, 4, 1}, {-1, kEnd, 1}, {-3, -1, 1}, {0, kEnd, 2}, {2, 1, 1}, {3, kEnd, -1}}) {
    auto y = b.slice(x, {r[0]}, {r[1]}, {1}, {r[2]});
    EXPECT_EQ(y->shape[1].str().substr(0, 1), "$") << r[0] << ":" << r[1] << ":" << r[2];
  }
  // A static dim next to symbolic ones slices as before.
  EXPECT_EQ(shape_str(b.slice(x, {2}, {100}, {2}, {3})->shape), "[b,seq,2]");
}

TEST(DimShapes, ReshapeInfersPolynomials) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"b", "past+seq", 8, 64});
  EXPECT_EQ(shape_str(b.reshape(x, {0, 0, -1})->shape), "[b,past+seq,512]");
  auto flat = b.reshape(x, {-1, 64});
  EXPECT_EQ(shape_str(flat->shape), "[8*b*past+8*b*seq,64]");
  EXPECT_EQ(shape_str(b.reshape(flat, {-1, 8, 64})->shape), "[b*past+b*seq,8,64]");
  EXPECT_EQ(shape_str(b.reshape(x, {0, -1, 64})->shape), "[b,8*past+8*seq,64]");
  EXPECT_EQ(shape_str(b.reshape(x, {0, 0, 8, 8, 8})->shape), "[b,past+seq,8,8,8]");
  EXPECT_TRUE(throws_with([&] { b.reshape(x, {0, 0, 7, -1}); }, {"does not divide"}));
  EXPECT_TRUE(throws_with([&] { b.reshape(x, {0, 8, 64}); }, {"element count"}));
  auto s = b.input("s", f32, {"seq", 3});
  EXPECT_TRUE(throws_with([&] { b.reshape(s, {-1, 2}); }, {"does not divide"}));
}

TEST(DimShapes, BroadcastingIsPolynomialEquality) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"past+seq", 4});
  auto y = b.input("y", f32, {"seq+past", 4});
  EXPECT_EQ(shape_str(b.add(x, y)->shape), "[past+seq,4]");
  auto z = b.input("z", f32, {"seq", 4});
  EXPECT_TRUE(throws_with([&] { b.add(x, z); }, {"past+seq vs seq"}));
}

// ---- plans and runs

// A plan binds a symbol only an op's output reveals by solving that output's dim. Here the
// output's declared dim stands for what a value-dependent op declares; seq comes from the input.
TEST(DimShapes, PlansSolveOutputDimsForTheirUnknown) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"seq"});
  auto c = b.constant(Tensor::random(f32, {3}, 1));
  auto y = b.concat({x, c}, 0);
  b.output("y", y);
  Graph g = b.build();
  Value* out = g.outputs()[0].second;
  ASSERT_EQ(shape_str(out->shape), "[seq+3]");
  PlanSpec spec;
  spec.graph = &g;
  out->shape = {"seq+k"};
  auto plan = build_plan(spec, {{"seq", 5}}, {});
  EXPECT_EQ(plan->symbols.at("k"), 3);
  ASSERT_NE(plan->find_sizes(out), nullptr);
  EXPECT_EQ(*plan->find_sizes(out), (Sizes{8}));
  out->shape = {"2*k"};  // seq+3 is even for seq=5, odd for seq=4
  EXPECT_EQ(build_plan(spec, {{"seq", 5}}, {})->symbols.at("k"), 4);
  EXPECT_TRUE(throws_with(
      [&] {
        build_plan(spec, {{"seq", 4}}, {});
      },
      {"[7]", "[2*k]", "cannot be solved", "not a multiple of 2"}));
  out->shape = {"k*k"};
  EXPECT_TRUE(throws_with(
      [&] {
        build_plan(spec, {{"seq", 6}}, {});
      },
      {"[k*k]", "'k' appears in a product"}));
}

// Inputs whose dims are expressions: lone symbols bind first, then each expression's one unknown
// is solved, and the rest must agree.
TEST(DimShapes, InputsBindExpressionDims) {
  GraphBuilder b;
  auto mask = b.input("mask", f32, {"past+seq"});
  auto x = b.input("x", f32, {"seq"});
  auto past = b.input("past", f32, {"past"});
  b.output("y", b.add(mask, b.concat({past, x}, 0)));
  Graph g = b.build();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    auto m = compile(g, o);
    std::map<std::string, Tensor> in{{"mask", Tensor::random(f32, {7}, 1)},
                                     {"x", Tensor::random(f32, {4}, 2)},
                                     {"past", Tensor::random(f32, {3}, 3)}};
    EXPECT_TRUE(testing::matches_reference(g, in, o));
    in["mask"] = Tensor::random(f32, {6}, 1);
    EXPECT_TRUE(throws_with([&] { m.run(in); },
                            {"input 'mask' dim 0 is 6", "'past+seq' = 7", "past=3", "seq=4"}));
  }
  // A product is checked against the sizes its factors got from other inputs.
  GraphBuilder b3;
  auto m3 = b3.input("m", f32, {"a", "b"});
  auto f3 = b3.input("f", f32, {"a*b"});
  b3.output("y", b3.add(b3.reshape(m3, {-1}), f3));
  auto prod = compile(b3.build(), testing::eager_opts());
  EXPECT_EQ(prod.run({{"m", Tensor::random(f32, {2, 3}, 1)}, {"f", Tensor::random(f32, {6}, 2)}})
                .at("y")
                .sizes(),
            (Sizes{6}));
  EXPECT_TRUE(throws_with(
      [&] {
        prod.run({{"m", Tensor::random(f32, {2, 3}, 1)}, {"f", Tensor::random(f32, {7}, 2)}});
      },
      {"input 'f' dim 0 is 7", "'a*b' = 6", "a=2 (from input 'm' dim 0)"}));
  // Solving: the lone "n+1" binds n.
  GraphBuilder b2;
  auto a = b2.input("a", f32, {"n+1"});
  b2.output("y", b2.slice(a, {1}, {std::numeric_limits<int64_t>::max()}, {0}));
  Graph g2 = b2.build();
  EXPECT_EQ(shape_str(g2.outputs()[0].second->shape), "[n]");
  auto m2 = compile(g2, testing::graph_opts());
  auto got = m2.run({{"a", Tensor::random(f32, {5}, 4)}});
  EXPECT_EQ(got.at("y").sizes(), (Sizes{4}));
  EXPECT_TRUE(throws_with(
      [&] {
        m2.run({{"a", Tensor::random(f32, {0}, 4)}});
      },
      {"input 'a' dim 0 is 0", "'n+1'", "n=-1, below 0"}));
}

// A KV-cache step: keys and values of the past concatenated with the new ones along the
// sequence axis (symbolic on both sides), attended over, and the cache returned. Compiled once,
// run at three lengths in eager and graph mode against the double-precision reference.
TEST(DimShapes, KvCacheConcatRunsAtEveryLength) {
  const int64_t B = 2, H = 3, Dh = 16;
  GraphBuilder b;
  auto past_k = b.input("past_key", f32, {B, H, "past", Dh});
  auto past_v = b.input("past_value", f32, {B, H, "past", Dh});
  auto q = b.input("query", f32, {B, H, "seq", Dh});
  auto k = b.input("key", f32, {B, H, "seq", Dh});
  auto v = b.input("value", f32, {B, H, "seq", Dh});
  auto keys = b.concat({past_k, k}, 2);
  auto vals = b.concat({past_v, v}, 2);
  auto scores = b.mul(b.matmul(q, b.transpose(keys, {0, 1, 3, 2})), 0.25);
  auto probs = b.softmax(scores);
  auto ctx = b.matmul(probs, vals);
  b.output("ctx", ctx);
  b.output("present_key", keys);
  b.output("present_value_tail", b.slice(vals, {1}, {std::numeric_limits<int64_t>::max()}, {2}));
  Graph g = b.build();
  EXPECT_EQ(shape_str(keys->shape), "[2,3,past+seq,16]");
  EXPECT_EQ(shape_str(probs->shape), "[2,3,seq,past+seq]");
  EXPECT_EQ(shape_str(g.outputs()[2].second->shape), "[2,3,past+seq-1,16]");
  auto graph_model = compile(g, testing::graph_opts());
  auto eager_model = compile(g, testing::eager_opts());
  size_t kernels = graph_model.kernels().size();
  int seed = 0;
  for (auto [past, seq] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {5, 1}, {37, 3}}) {
    std::map<std::string, Tensor> in;
    for (auto [name, len] : std::vector<std::pair<std::string, int64_t>>{{"past_key", past},
                                                                         {"past_value", past},
                                                                         {"query", seq},
                                                                         {"key", seq},
                                                                         {"value", seq}}) {
      in[name] = Tensor::random(f32, {B, H, len, Dh}, ++seed);
    }
    auto want = ref::run_graph(g, in);
    for (auto* m : {&graph_model, &eager_model}) {
      auto got = m->run(in);
      EXPECT_EQ(got.at("present_key").sizes(), (Sizes{B, H, past + seq, Dh}));
      EXPECT_EQ(got.at("present_value_tail").sizes(), (Sizes{B, H, past + seq - 1, Dh}));
      for (auto& [name, w] : want) {
        EXPECT_TRUE(testing::close_to_ref(got.at(name), w))
            << name << " past=" << past << " seq=" << seq
            << (m == &graph_model ? " graph" : " eager");
      }
    }
  }
  EXPECT_EQ(graph_model.kernels().size(), kernels);
  EXPECT_EQ(graph_model.stats().compilations, 1);
  EXPECT_EQ(graph_model.stats().plan_builds, 3);
}

}  // namespace
}  // namespace ubfuse
