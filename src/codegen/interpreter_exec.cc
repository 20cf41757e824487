// The interpreter's inner loops, compiled for every Highway target and dispatched at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codegen/interpreter_exec.cc"
#include "kernels/cpu/hwy_targets.h"
// foreach_target must come first.
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include <algorithm>
#include <vector>

#include "codegen/interpreter.h"
#include "codegen/ubk_vec-inl.h"
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "kernels/cpu/vecmath.h"
#include "ubfuse/error.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace {

using interp::Instr;
using interp::Kind;
using interp::TileProgram;
using kir::Op;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Operand lists and calls by kir_ops.def's arity and Form columns.
#define UBF_KIR_ARGS_0
#define UBF_KIR_ARGS_1 a
#define UBF_KIR_ARGS_2 a, b
#define UBF_KIR_ARGS_3 a, b, c
#define UBF_KIR_CALL_Vec(fn, ...) return fn(d, __VA_ARGS__);
#define UBF_KIR_CALL_Hwy(fn, ...) return hn::fn(__VA_ARGS__);
#define UBF_KIR_CALL_VecImm(fn, ...) return fn(d, __VA_ARGS__, imm);
#define UBF_KIR_CALL_Leaf(fn, ...) break;
#define UBF_KIR_CALL_Row(fn, ...) break;

// Calls f.template operator()<RowAcc<K>>() for the reduction op.
template <class F>
HWY_INLINE void WithRowAcc(Op op, F&& f) {
  switch (op) {
#define UBF_KIR_ACC_Row(fn) return f.template operator()<RowAcc<fn>>();
#define UBF_KIR_ACC_Leaf(fn) break;
#define UBF_KIR_ACC_Vec(fn) break;
#define UBF_KIR_ACC_Hwy(fn) break;
#define UBF_KIR_ACC_VecImm(fn) break;
#define UBF_KIR(name, arity, ir, fn, form, cost, bf16) \
  case Op::name:                                       \
    UBF_KIR_ACC_##form(fn)
#include "codegen/kir_ops.def"
#undef UBF_KIR_ACC_Row
#undef UBF_KIR_ACC_Leaf
#undef UBF_KIR_ACC_Vec
#undef UBF_KIR_ACC_Hwy
#undef UBF_KIR_ACC_VecImm
  }
  UBF_CHECK(false, std::string("interpreter: not a reduction: ") + kir::op_str(op));
}

// The vector math of op (kir_ops.def's Fn and Form); a, b, c as many as it takes.
HWY_INLINE VF Apply(DF d, Op op, VF a, VF b, VF c, float imm) {
  switch (op) {
#define UBF_KIR(name, arity, ir, fn, form, cost, bf16) \
  case Op::name:                                       \
    UBF_KIR_CALL_##form(fn, UBF_KIR_ARGS_##arity)
#include "codegen/kir_ops.def"
  }
  HWY_ASSERT(false);  // leaves and reductions have no vector math
  return a;
}
#undef UBF_KIR_ARGS_0
#undef UBF_KIR_ARGS_1
#undef UBF_KIR_ARGS_2
#undef UBF_KIR_ARGS_3
#undef UBF_KIR_CALL_Vec
#undef UBF_KIR_CALL_Hwy
#undef UBF_KIR_CALL_VecImm
#undef UBF_KIR_CALL_Leaf
#undef UBF_KIR_CALL_Row

// One op over a tile of n columns (registers are padded to kTile, so whole vectors are safe).
// The switch sits outside the vector loop: one loop per op.
HWY_NOINLINE void ComputeTile(const Instr& in, float* regs, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  float* HWY_RESTRICT dst = regs + size_t(in.dst) * interp::kTile;
  const float* a = regs + size_t(in.a) * interp::kTile;
  const float* b = in.b >= 0 ? regs + size_t(in.b) * interp::kTile : a;
  const float* c = in.c >= 0 ? regs + size_t(in.c) * interp::kTile : a;
#define UBF_TILE_LOOP(OP)                                                                          \
  case Op::OP:                                                                                     \
    for (size_t i = 0; i < n; i += L) {                                                            \
      hn::Store(                                                                                   \
          Apply(d, Op::OP, hn::Load(d, a + i), hn::Load(d, b + i), hn::Load(d, c + i), in.imm), d, \
          dst + i);                                                                                \
    }                                                                                              \
    return;
#define UBF_TILE_Vec(OP) UBF_TILE_LOOP(OP)
#define UBF_TILE_Hwy(OP) UBF_TILE_LOOP(OP)
#define UBF_TILE_VecImm(OP) UBF_TILE_LOOP(OP)
#define UBF_TILE_Leaf(OP) \
  case Op::OP:            \
    break;
#define UBF_TILE_Row(OP) UBF_TILE_Leaf(OP)
  switch (in.op) {
#define UBF_KIR(name, arity, ir, fn, form, cost, bf16) UBF_TILE_##form(name)
#include "codegen/kir_ops.def"
  }
#undef UBF_TILE_LOOP
#undef UBF_TILE_Vec
#undef UBF_TILE_Hwy
#undef UBF_TILE_VecImm
#undef UBF_TILE_Leaf
#undef UBF_TILE_Row
  HWY_ASSERT(false);  // leaves and reductions are not tile instructions
}

template <typename T>
HWY_INLINE void LoadTile(const void* src, float* HWY_RESTRICT dst, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const T* p = static_cast<const T*>(src);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::Store(LoadF32(d, p + i), d, dst + i);
  if (i < n) hn::Store(LoadNF32(d, p + i, n - i), d, dst + i);
}

// Columns [c0, c0 + n) of RotateHalf's view of a row: the rotation of its first r columns.
template <typename T>
HWY_INLINE void LoadRotatedTile(const void* row, int64_t c0, int64_t r, bool pairs,
                                float* HWY_RESTRICT dst, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const T* p = static_cast<const T*>(row);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const int64_t c = c0 + int64_t(i);
    hn::Store(pairs ? LoadRotPairsF32(d, p, c, r) : LoadRotHalfF32(d, p, c, r), d, dst + i);
  }
  if (i < n) hn::Store(LoadNRotatedF32(d, p, c0 + int64_t(i), r, n - i, pairs), d, dst + i);
}

HWY_INLINE void LoadRotatedAny(DType t, const void* row, int64_t c0, int64_t r, bool pairs,
                               float* dst, size_t n) {
  switch (t) {
    case DType::f32:
      return LoadRotatedTile<float>(row, c0, r, pairs, dst, n);
    case DType::bf16:
      return LoadRotatedTile<hwy::bfloat16_t>(row, c0, r, pairs, dst, n);
    case DType::f16:
      return LoadRotatedTile<hwy::float16_t>(row, c0, r, pairs, dst, n);
    default:
      HWY_ASSERT(false);  // RotateHalf takes float inputs only (shape inference)
  }
}

template <typename T>
HWY_INLINE void StoreTile(const float* src, void* dstv, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  T* p = static_cast<T*>(dstv);
  size_t i = 0;
  for (; i + L <= n; i += L) StoreF32(hn::Load(d, src + i), d, p + i);
  if (i < n) StoreNF32(hn::Load(d, src + i), d, p + i, n - i);
}

HWY_INLINE void LoadAny(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::f32:
      return LoadTile<float>(src, dst, n);
    case DType::bf16:
      return LoadTile<hwy::bfloat16_t>(src, dst, n);
    case DType::f16:
      return LoadTile<hwy::float16_t>(src, dst, n);
    case DType::i32:
      return LoadTile<int32_t>(src, dst, n);
    default:
      return LoadTile<uint8_t>(src, dst, n);
  }
}

HWY_INLINE void StoreAny(DType t, const float* src, void* dst, size_t n) {
  switch (t) {
    case DType::f32:
      return StoreTile<float>(src, dst, n);
    case DType::bf16:
      return StoreTile<hwy::bfloat16_t>(src, dst, n);
    case DType::f16:
      return StoreTile<hwy::float16_t>(src, dst, n);
    default:
      return StoreTile<uint8_t>(src, dst, n);
  }
}

template <typename T>
HWY_INLINE float LoadScalarT(const void* p) {
  const DF d;
  return hn::GetLane(LoadNF32(d, static_cast<const T*>(p), 1));
}
HWY_INLINE float LoadScalar(DType t, const void* p) {
  switch (t) {
    case DType::f32:
      return *static_cast<const float*>(p);
    case DType::bf16:
      return LoadScalarT<hwy::bfloat16_t>(p);
    case DType::f16:
      return LoadScalarT<hwy::float16_t>(p);
    case DType::i32:
      return float(*static_cast<const int32_t*>(p));
    default:
      return *static_cast<const uint8_t*>(p) ? 1.0f : 0.0f;
  }
}

template <typename T>
HWY_INLINE void StoreScalarT(float v, void* p) {
  const DF d;
  StoreNF32(hn::Set(d, v), d, static_cast<T*>(p), 1);
}
HWY_INLINE void StoreScalar(DType t, float v, void* p) {
  switch (t) {
    case DType::f32:
      *static_cast<float*>(p) = v;
      return;
    case DType::bf16:
      return StoreScalarT<hwy::bfloat16_t>(v, p);
    case DType::f16:
      return StoreScalarT<hwy::float16_t>(v, p);
    default:
      *static_cast<uint8_t*>(p) = v != 0.0f ? 1 : 0;
      return;
  }
}

// Row scalar instructions (per call, per row): the vector math on a splat, lane 0.
void RunRowInstrs(const std::vector<Instr>& instrs, float* rowv, const UbfKernelArgs* args,
                  const char* const* in_rows, char* const* out_rows,
                  const std::vector<DType>& out_dtypes) {
  const DF d;
  for (const Instr& in : instrs) {
    switch (in.kind) {
      case Kind::LoadRow:
        if (!in.sample) {
          rowv[in.dst] = LoadScalar(in.dtype, in_rows[in.arg]);
        } else if (args->cols == 0) {  // an empty row has nothing to sample
          rowv[in.dst] = 0.0f;
        } else {
          const int64_t col = int64_t(in.imm * float(args->cols - 1));
          rowv[in.dst] =
              LoadScalar(in.dtype, in_rows[in.arg] + col * int64_t(dtype_size(in.dtype)));
        }
        break;
      case Kind::StoreOut:
        StoreScalar(out_dtypes[size_t(in.arg)], rowv[in.a], out_rows[in.arg]);
        break;
      default:
        if (in.op == Op::Const) {
          rowv[in.dst] = in.imm;
        } else if (in.op == Op::Cols) {
          rowv[in.dst] = float(args->cols);
        } else {
          const VF a = hn::Set(d, in.a >= 0 ? rowv[in.a] : 0.0f);
          const VF b = hn::Set(d, in.b >= 0 ? rowv[in.b] : 0.0f);
          const VF c = hn::Set(d, in.c >= 0 ? rowv[in.c] : 0.0f);
          rowv[in.dst] = hn::GetLane(Apply(d, in.op, a, b, c, in.imm));
        }
    }
  }
}

// One pass's column part over the row: splats, the tiles of its col instrs, its reductions.
void RunPassTiles(const interp::Pass& pass, const UbfKernelArgs* args, float* ub, float* regs,
                  float* rowv, const char* const* in_rows, char* const* out_rows,
                  std::vector<float>& acc_mem) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const int64_t cols = args->cols;
  for (const Instr& s : pass.splats) {
    float* dst = regs + size_t(s.dst) * interp::kTile;
    const VF v = hn::Set(d, rowv[s.a]);
    for (size_t i = 0; i < size_t(interp::kTile); i += L) hn::Store(v, d, dst + i);
  }
  acc_mem.resize(pass.reductions.size() * hn::MaxLanes(d) + hn::MaxLanes(d));
  float* acc = acc_mem.data();
  for (size_t k = 0; k < pass.reductions.size(); k++) {
    WithRowAcc(pass.reductions[k].op,
               [&]<class Acc>() HWY_ATTR { hn::StoreU(Acc::Init(d), d, acc + k * L); });
  }
  for (int64_t c0 = 0; c0 < cols; c0 += interp::kTile) {
    const size_t n = size_t(std::min<int64_t>(interp::kTile, cols - c0));
    for (const Instr& in : pass.col) {
      switch (in.kind) {
        case Kind::LoadIn: {
          const size_t es = dtype_size(in.dtype);
          if (kir::is_rotation(in.rot)) {
            LoadRotatedAny(in.dtype, in_rows[in.arg], c0, int64_t(in.imm),
                           in.rot == kir::Align::RotPairs, regs + size_t(in.dst) * interp::kTile,
                           n);
            break;
          }
          LoadAny(in.dtype, in_rows[in.arg] + size_t(c0) * es,
                  regs + size_t(in.dst) * interp::kTile, n);
          break;
        }
        case Kind::LoadSlot:
          LoadTile<float>(ub + in.arg * args->slot_floats + c0,
                          regs + size_t(in.dst) * interp::kTile, n);
          break;
        case Kind::StoreSlot:
          StoreTile<float>(regs + size_t(in.a) * interp::kTile,
                           ub + in.arg * args->slot_floats + c0, n);
          break;
        case Kind::StoreOut: {
          const size_t es = dtype_size(in.dtype);
          StoreAny(in.dtype, regs + size_t(in.a) * interp::kTile,
                   out_rows[in.arg] + size_t(c0) * es, n);
          break;
        }
        default:
          ComputeTile(in, regs, n);
          break;
      }
    }
    for (size_t k = 0; k < pass.reductions.size(); k++) {
      const float* src = regs + size_t(pass.reductions[k].src) * interp::kTile;
      WithRowAcc(pass.reductions[k].op, [&]<class Acc>() HWY_ATTR {
        VF a = hn::LoadU(d, acc + k * L);
        size_t i = 0;
        for (; i + L <= n; i += L) a = Acc::Step(d, a, hn::Load(d, src + i));
        if (i < n) a = Acc::StepTail(d, a, hn::Load(d, src + i), n - i);
        hn::StoreU(a, d, acc + k * L);
      });
    }
  }
  for (size_t k = 0; k < pass.reductions.size(); k++) {
    const VF a = hn::LoadU(d, acc + k * L);
    WithRowAcc(pass.reductions[k].op, [&]<class Acc>() HWY_ATTR {
      rowv[size_t(pass.reductions[k].dst)] = Acc::Finish(d, a, Acc::Init(d));
    });
  }
}

struct Scratch {
  hwy::AlignedFreeUniquePtr<float[]> regs;
  size_t size = 0;
};

void RunRows(const TileProgram& tp, const UbfKernelArgs* args, int64_t row_begin, int64_t row_end,
             float* ub, int64_t ub_floats) {
  static thread_local Scratch scratch;
  size_t need = size_t(tp.num_col_regs + 1) * interp::kTile;
  if (scratch.size < need) {
    scratch.regs = hwy::AllocateAligned<float>(need);
    for (size_t i = 0; i < need; i++) scratch.regs[i] = 0.0f;
    scratch.size = need;
  }
  float* regs = scratch.regs.get();
  const interp::Variant& var = args->use_ub ? tp.ub : tp.reread;
  const size_t nin = tp.in_dtypes.size(), nout = tp.out_dtypes.size();
  std::vector<float> rowv(size_t(tp.num_row_regs) + 1, 0.0f);
  std::vector<const char*> in_rows(nin);
  std::vector<char*> out_rows(nout);
  RunRowInstrs(tp.per_call, rowv.data(), args, in_rows.data(), out_rows.data(), tp.out_dtypes);
  (void)ub_floats;
  // Reduction accumulators, one vector each (kept in memory: some targets' vectors are sizeless).
  std::vector<float> acc_mem;
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (size_t i = 0; i < nin; i++) {
      in_rows[i] = static_cast<const char*>(args->in[i].data) +
                   ubf_row_offset(&args->in[i], r) * int64_t(dtype_size(tp.in_dtypes[i]));
    }
    for (size_t i = 0; i < nout; i++) {
      out_rows[i] = static_cast<char*>(args->out[i].data) +
                    ubf_row_offset(&args->out[i], r) * int64_t(dtype_size(tp.out_dtypes[i]));
    }
    RunRowInstrs(var.before, rowv.data(), args, in_rows.data(), out_rows.data(), tp.out_dtypes);
    for (const interp::Pass& pass : var.passes) {
      RunPassTiles(pass, args, ub, regs, rowv.data(), in_rows.data(), out_rows.data(), acc_mem);
      RunRowInstrs(pass.after, rowv.data(), args, in_rows.data(), out_rows.data(), tp.out_dtypes);
      for (const interp::GuardedPass& g : pass.rescues) {
        if (rowv[size_t(g.guard)] != 0.0f) {
          RunPassTiles(g.pass, args, ub, regs, rowv.data(), in_rows.data(), out_rows.data(),
                       acc_mem);
        } else {
          for (const auto& red : g.pass.reductions) rowv[size_t(red.dst)] = 0.0f;
        }
      }
      RunRowInstrs(pass.after_rescue, rowv.data(), args, in_rows.data(), out_rows.data(),
                   tp.out_dtypes);
    }
  }
}

}  // namespace
// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ubfuse::interp {

HWY_EXPORT(RunRows);

void run_rows(const TileProgram& tp, const UbfKernelArgs* args, int64_t row_begin, int64_t row_end,
              float* ub, int64_t ub_floats) {
  HWY_DYNAMIC_DISPATCH(RunRows)(tp, args, row_begin, row_end, ub, ub_floats);
}

}  // namespace ubfuse::interp
#endif  // HWY_ONCE
