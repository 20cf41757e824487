// .npy reader/writer: round trips per dtype, header versions, errors that name file and field, and
// interop with numpy itself when /usr/bin/python3 has it.
#include "ubfuse/npy.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace ubfuse {
namespace {

using testing::throws_with;
namespace fs = std::filesystem;

fs::path npy_tmp_dir() {
  fs::path d = fs::temp_directory_path() / ("ubfuse_npy_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

TEST(Npy, RoundTripEveryDtype) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::boolean}) {
    Tensor x = Tensor::random(t, {2, 3, 5}, 7, -4, 4);
    Tensor y = parse_npy(to_npy_bytes(x), "mem");
    ASSERT_EQ(y.dtype(), t) << dtype_name(t);
    ASSERT_EQ(y.sizes(), x.sizes());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0) << dtype_name(t);
  }
}

TEST(Npy, ScalarsAndEmptyAndOneDim) {
  for (Sizes s : {Sizes{}, Sizes{0}, Sizes{4}, Sizes{3, 0, 2}}) {
    Tensor x = Tensor::random(DType::f32, s, 1);
    std::string b = to_npy_bytes(x);
    EXPECT_EQ(b.size() % 64, x.nbytes() % 64) << "data must start 64-byte aligned";
    Tensor y = parse_npy(b, "mem");
    EXPECT_EQ(y.sizes(), s);
  }
  EXPECT_NE(to_npy_bytes(Tensor::zeros(DType::f32, {4})).find("'shape': (4,)"), std::string::npos);
}

std::string header_v1(const std::string& dict) {
  std::string h = dict + "\n";
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h;
}

TEST(Npy, ReadsVersion2AndF64) {
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n";
  std::string b("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; i++) b += char((dict.size() >> (8 * i)) & 0xff);
  b += dict;
  double v[2] = {1.5, -2.25};
  b.append(reinterpret_cast<const char*>(v), 16);
  Tensor t = parse_npy(b, "v2.npy");
  ASSERT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.get(0), 1.5);
  EXPECT_EQ(t.get(1), -2.25);
}

TEST(Npy, ErrorsNameFileAndField) {
  EXPECT_TRUE(throws_with([] { parse_npy("hello", "a.npy"); }, {"'a.npy'", "magic"}));
  EXPECT_TRUE(throws_with(
      [] {
        parse_npy(header_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }"), "f.npy");
      },
      {"'f.npy'", "fortran_order", "C order"}));
  EXPECT_TRUE(throws_with(
      [] {
        parse_npy(header_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }"), "b.npy");
      },
      {"'b.npy'", "descr", "'>f4'", "'<f4'"}));
  EXPECT_TRUE(throws_with(
      [] {
        parse_npy(header_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"), "t.npy");
      },
      {"'t.npy'", "truncated", "16"}));
  EXPECT_TRUE(
      throws_with([] { parse_npy(header_v1("{'descr': '<f4', 'fortran_order': False}"), "s.npy"); },
                  {"'s.npy'", "'shape'"}));
  EXPECT_TRUE(throws_with(
      [] {
        parse_npy(header_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"), "n.npy");
      },
      {"'n.npy'", "'shape'"}));
  EXPECT_TRUE(
      throws_with([] { read_npy("/nonexistent/x.npy"); }, {"/nonexistent/x.npy", "cannot open"}));
}

TEST(Npy, FileRoundTrip) {
  fs::path p = npy_tmp_dir() / "x.npy";
  Tensor x = Tensor::random(DType::i64, {3, 4}, 3, -100, 100);
  write_npy(p.string(), x);
  Tensor y = read_npy(p.string());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0);
  fs::remove_all(p.parent_path());
}

bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

TEST(Npy, InteropWithNumpy) {
  if (!have_numpy()) GTEST_SKIP() << "no numpy for /usr/bin/python3";
  fs::path d = npy_tmp_dir();
  // ubfuse -> numpy: numpy checks the values, including bf16 stored as uint16 bits.
  Tensor f = Tensor::from_floats(DType::f32, {2, 2}, {1, -2, 3.5f, 0});
  Tensor h = Tensor::from_floats(DType::f16, {3}, {0.5f, -1, 2});
  Tensor b = Tensor::from_floats(DType::bf16, {2}, {1.5f, -3});
  Tensor m = Tensor::zeros(DType::boolean, {2});
  m.set(1, 1);
  write_npy((d / "f.npy").string(), f);
  write_npy((d / "h.npy").string(), h);
  write_npy((d / "b.npy").string(), b);
  write_npy((d / "m.npy").string(), m);
  std::string check =
      "/usr/bin/python3 -c \"import numpy as np, sys; d=sys.argv[1]; "
      "f=np.load(d+'/f.npy'); assert f.dtype==np.float32 and f.tolist()==[[1,-2],[3.5,0]], f; "
      "h=np.load(d+'/h.npy'); assert h.dtype==np.float16 and h.tolist()==[0.5,-1,2], h; "
      "b=np.load(d+'/b.npy'); bf=(b.astype(np.uint32)<<16).view(np.float32); "
      "assert b.dtype==np.uint16 and bf.tolist()==[1.5,-3], bf; "
      "m=np.load(d+'/m.npy'); assert m.dtype==np.bool_ and m.tolist()==[False,True], m; "
      "np.save(d+'/i.npy', np.arange(6, dtype=np.int32).reshape(2,3)); "
      "np.save(d+'/g.npy', np.array([[1.25]], dtype=np.float64)); "
      "np.save(d+'/big.npy', np.zeros((3,)*12, dtype=np.float32))\" " +
      d.string();
  ASSERT_EQ(std::system(check.c_str()), 0) << check;
  // numpy -> ubfuse
  Tensor i = read_npy((d / "i.npy").string());
  ASSERT_EQ(i.dtype(), DType::i32);
  EXPECT_EQ(i.sizes(), (Sizes{2, 3}));
  EXPECT_EQ(i.get(5), 5);
  Tensor g = read_npy((d / "g.npy").string());
  EXPECT_EQ(g.dtype(), DType::f32);
  EXPECT_EQ(g.get(0), 1.25);
  EXPECT_EQ(read_npy((d / "big.npy").string()).rank(), 12);
  fs::remove_all(d);
}

}  // namespace
}  // namespace ubfuse
