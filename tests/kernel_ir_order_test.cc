// The kernel IR's expression order (kir::canonicalize_order): it depends only on what the
// outputs compute, never on the order the lowerer happened to create expressions in, which for
// nested calls C++ leaves to the compiler (GCC and clang differ). A kernel's source, and so its
// key in the kernel cache, must not depend on the compiler that built ubfuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "fused_kernel_util.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::seed_block;
using testing::whole_graph_group;

std::unique_ptr<kir::Program> lowered(const Graph& g) {
  std::string why;
  auto p = kir::lower_group(whole_graph_group(g), &why);
  EXPECT_TRUE(p) << why;
  return p;
}

// The expressions and outputs, field by field (the listing also prints analysis results).
std::string structure(const kir::Program& p) {
  std::string s;
  for (const kir::Expr& e : p.exprs) {
    s += std::string(kir::op_str(e.op)) + (e.row ? " row " : " col ") + std::to_string(e.a) + " " +
         std::to_string(e.b) + " " + std::to_string(e.c) + " arg" + std::to_string(e.arg) +
         " align" + std::to_string(int(e.align)) + " imm" + std::to_string(e.imm) + " guard" +
         std::to_string(e.guard) + "\n";
  }
  for (const kir::Output& o : p.outputs) s += "out " + std::to_string(o.expr) + "\n";
  return s;
}

// p's expressions in another topological order (Kahn's algorithm, a random ready one each
// step), with an expression no output reads inserted as well. *moved: whether the order changed.
kir::Program shuffled(const kir::Program& p, unsigned seed, bool* moved) {
  const size_t n = p.exprs.size();
  std::vector<std::vector<int>> users(n);
  std::vector<int> missing(n, 0), ready;
  for (size_t i = 0; i < n; i++) {
    const kir::Expr& e = p.exprs[i];
    for (int o : {e.a, e.b, e.c, e.guard}) {
      if (o < 0) continue;
      users[size_t(o)].push_back(int(i));
      missing[i]++;
    }
    if (missing[i] == 0) ready.push_back(int(i));
  }
  std::mt19937 rng(seed);
  std::vector<int> order, id(n, -1);
  while (!ready.empty()) {
    const size_t k = std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng);
    const int e = ready[k];
    ready.erase(ready.begin() + std::ptrdiff_t(k));
    id[size_t(e)] = int(order.size());
    order.push_back(e);
    for (int u : users[size_t(e)]) {
      if (--missing[size_t(u)] == 0) ready.push_back(u);
    }
  }
  EXPECT_EQ(order.size(), n);
  *moved = false;
  for (size_t i = 0; i < n; i++) *moved = *moved || order[i] != int(i);
  kir::Program q = p;
  q.exprs.clear();
  for (int e : order) {
    kir::Expr x = p.exprs[size_t(e)];
    for (int* o : {&x.a, &x.b, &x.c, &x.guard}) {
      if (*o >= 0) *o = id[size_t(*o)];
    }
    q.exprs.push_back(x);
  }
  kir::Expr dead;  // a dead negation of the first expression, placed first among its users
  dead.op = kir::Op::Neg;
  dead.row = q.exprs[0].row;
  dead.a = 0;
  q.exprs.insert(q.exprs.begin() + 1, dead);
  for (kir::Expr& x : q.exprs) {
    for (int* o : {&x.a, &x.b, &x.c, &x.guard}) {
      if (*o >= 1 && &x != &q.exprs[1]) ++*o;
    }
  }
  for (kir::Output& o : q.outputs) o.expr = id[size_t(o.expr)] + (id[size_t(o.expr)] >= 1);
  return q;
}

TEST(KernelIrOrder, AnyCreationOrderGivesTheSameProgram) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"rows", 96});
  auto r = b.input("r", DType::f32, {"rows", 96});
  auto h = b.add(x, r);
  b.output("y", b.silu(b.layer_norm(h, b.constant(Tensor::random(DType::f32, {96}, 1)),
                                    b.constant(Tensor::random(DType::f32, {96}, 2)), 1e-5)));
  b.output("s", b.softmax(b.mul(h, x)));
  b.output("n", b.rms_norm(h, b.constant(Tensor::random(DType::f32, {96}, 3)), 1e-6));
  for (const Graph& g : {b.build(), seed_block({"rows", 4096}, DType::bf16)}) {
    auto p = lowered(g);
    ASSERT_TRUE(p);
    const std::string want = structure(*p);
    kir::Program once = *p;
    kir::canonicalize_order(once);  // the lowerer already did: nothing moves
    EXPECT_EQ(structure(once), want);
    int moved_orders = 0;
    for (unsigned seed = 1; seed <= 20; seed++) {
      bool moved = false;
      kir::Program q = shuffled(*p, seed, &moved);
      moved_orders += moved;
      kir::canonicalize_order(q);
      EXPECT_EQ(structure(q), want) << "seed " << seed;
    }
    EXPECT_GE(moved_orders, 15);  // the shuffles did reorder
  }
}

TEST(KernelIrOrder, OperandsComeFirstAndNothingDeadStays) {
  auto p = lowered(seed_block({"rows", 4096}, DType::f32));
  ASSERT_TRUE(p);
  for (size_t i = 0; i < p->exprs.size(); i++) {
    const kir::Expr& e = p->exprs[i];
    for (int o : {e.a, e.b, e.c, e.guard}) EXPECT_LT(o, int(i)) << "expression " << i;
  }
  EXPECT_TRUE(std::all_of(p->needed.begin(), p->needed.end(), [](bool b) { return b; }));
}

}  // namespace
}  // namespace ubfuse
