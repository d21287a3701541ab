//===- GuardedIEEETest.cpp - Guarded div.rn / sqrt.rn equal the IEEE ops -===//
//
// The strict GPU lowering divides and takes square roots of the update's
// lanes through the instruction sequence ptxas emits on the fast path of
// div.rn.f32 and sqrt.rn.f32, with the range check done once per thread
// (LaneMath::guarded in lib/Codegen/LaneMath.cpp). This
// suite runs that sequence, as the lowering writes it in PTX, against the
// hardware's div.rn.f32 / sqrt.rn.f32 over the guarded domain:
//  - sqrt(a): every float a in [2^-100, 2^100];
//  - a / c with c uniform (its reciprocal once): every float a with |a| in
//    [2^-60, 2^60], both signs, for 40 divisors (powers of two, Adam's bias
//    corrections, mantissas of all ones, random ones of either sign);
//  - a / c with c per lane: 2 x 0xF0000000 pairs drawn from the domain.
// A mismatch counts one; each case asserts none.
//
//===----------------------------------------------------------------------===//

#include "GpuTestUtil.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

namespace cu = qopt::rt::cu;
using qopt::test::haveGpu;

// The sequences as LaneMath::guardedDiv / guardedSqrt emit them (compare
// test/Conversion/QoptToGPU/guarded-ieee.mlir): rcp.approx.ftz, then
// e = fma(-c, r0, 1), r = fma(e, r0, r0), q0 = a * r, q = fma(r, fma(-c, q0,
// a), q0); rsqrt.approx.ftz, s0 = a * y, h = y * 0.5, s = fma(fma(-s0, s0, a),
// h, s0). Each kernel walks the 32-bit patterns [start, start + count) (the
// sign bit of `sign` or'ed in) grid-stride and counts lanes whose bits differ
// from div.rn / sqrt.rn.
const char *kPtx = R"(
.version 8.0
.target sm_90
.address_size 64

.visible .entry sqrt_domain(.param .u32 start, .param .u32 count, .param .u64 bad)
{
  .reg .pred %p<3>;
  .reg .b32 %r<16>;
  .reg .f32 %f<12>;
  .reg .b64 %rd<2>;
  ld.param.u32 %r1, [start];
  ld.param.u32 %r2, [count];
  ld.param.u64 %rd1, [bad];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.u32 %r6, %r3, %r4, %r5;
  mov.u32 %r7, %nctaid.x;
  mul.lo.u32 %r8, %r7, %r4;
LOOP:
  setp.ge.u32 %p1, %r6, %r2;
  @%p1 bra DONE;
  add.u32 %r9, %r1, %r6;
  mov.b32 %f1, %r9;
  rsqrt.approx.ftz.f32 %f2, %f1;
  mul.rn.f32 %f3, %f1, %f2;
  mul.rn.f32 %f4, %f2, 0f3F000000;
  neg.f32 %f5, %f3;
  fma.rn.f32 %f6, %f5, %f3, %f1;
  fma.rn.f32 %f7, %f6, %f4, %f3;
  sqrt.rn.f32 %f8, %f1;
  mov.b32 %r10, %f7;
  mov.b32 %r11, %f8;
  setp.ne.u32 %p2, %r10, %r11;
  @%p2 red.global.add.u32 [%rd1], 1;
  add.u32 %r6, %r6, %r8;
  bra LOOP;
DONE:
  ret;
}

.visible .entry div_uniform(.param .u32 start, .param .u32 count, .param .u32 sign,
                            .param .f32 c, .param .u64 bad)
{
  .reg .pred %p<3>;
  .reg .b32 %r<16>;
  .reg .f32 %f<16>;
  .reg .b64 %rd<2>;
  ld.param.u32 %r1, [start];
  ld.param.u32 %r2, [count];
  ld.param.u32 %r12, [sign];
  ld.param.f32 %f1, [c];
  ld.param.u64 %rd1, [bad];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.u32 %r6, %r3, %r4, %r5;
  mov.u32 %r7, %nctaid.x;
  mul.lo.u32 %r8, %r7, %r4;
  rcp.approx.ftz.f32 %f2, %f1;
  neg.f32 %f3, %f1;
  fma.rn.f32 %f4, %f3, %f2, 0f3F800000;
  fma.rn.f32 %f5, %f4, %f2, %f2;
LOOP:
  setp.ge.u32 %p1, %r6, %r2;
  @%p1 bra DONE;
  add.u32 %r9, %r1, %r6;
  or.b32 %r9, %r9, %r12;
  mov.b32 %f6, %r9;
  mul.rn.f32 %f7, %f6, %f5;
  fma.rn.f32 %f8, %f3, %f7, %f6;
  fma.rn.f32 %f9, %f5, %f8, %f7;
  div.rn.f32 %f10, %f6, %f1;
  mov.b32 %r10, %f9;
  mov.b32 %r11, %f10;
  setp.ne.u32 %p2, %r10, %r11;
  @%p2 red.global.add.u32 [%rd1], 1;
  add.u32 %r6, %r6, %r8;
  bra LOOP;
DONE:
  ret;
}

// Pair k: a and c from two rounds of a 32-bit mix of k and `seed`, mapped into
// |x| in [2^-60, 2^60) (exponent field 67..186, any mantissa, any sign).
.visible .entry div_pairs(.param .u32 count, .param .u32 seed, .param .u64 bad)
{
  .reg .pred %p<3>;
  .reg .b32 %r<32>;
  .reg .f32 %f<16>;
  .reg .b64 %rd<2>;
  ld.param.u32 %r2, [count];
  ld.param.u32 %r20, [seed];
  ld.param.u64 %rd1, [bad];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.u32 %r6, %r3, %r4, %r5;
  mov.u32 %r7, %nctaid.x;
  mul.lo.u32 %r8, %r7, %r4;
LOOP:
  setp.ge.u32 %p1, %r6, %r2;
  @%p1 bra DONE;
  xor.b32 %r9, %r6, %r20;
  mul.lo.u32 %r9, %r9, 0x9E3779B1;
  shr.u32 %r10, %r9, 15;
  xor.b32 %r9, %r9, %r10;
  mul.lo.u32 %r9, %r9, 0x85EBCA6B;
  shr.u32 %r10, %r9, 13;
  xor.b32 %r9, %r9, %r10;
  mul.lo.u32 %r11, %r9, 0xC2B2AE35;
  shr.u32 %r10, %r11, 16;
  xor.b32 %r11, %r11, %r10;
  // a: sign and mantissa from %r9, exponent 67 + (bits 23..30 mod 120)
  shr.u32 %r12, %r9, 23;
  and.b32 %r12, %r12, 255;
  rem.u32 %r12, %r12, 120;
  add.u32 %r12, %r12, 67;
  shl.b32 %r12, %r12, 23;
  and.b32 %r13, %r9, 0x807FFFFF;
  or.b32 %r13, %r13, %r12;
  shr.u32 %r14, %r11, 23;
  and.b32 %r14, %r14, 255;
  rem.u32 %r14, %r14, 120;
  add.u32 %r14, %r14, 67;
  shl.b32 %r14, %r14, 23;
  and.b32 %r15, %r11, 0x807FFFFF;
  or.b32 %r15, %r15, %r14;
  mov.b32 %f1, %r13;
  mov.b32 %f11, %r15;
  rcp.approx.ftz.f32 %f2, %f11;
  neg.f32 %f3, %f11;
  fma.rn.f32 %f4, %f3, %f2, 0f3F800000;
  fma.rn.f32 %f5, %f4, %f2, %f2;
  mul.rn.f32 %f7, %f1, %f5;
  fma.rn.f32 %f8, %f3, %f7, %f1;
  fma.rn.f32 %f9, %f5, %f8, %f7;
  div.rn.f32 %f10, %f1, %f11;
  mov.b32 %r16, %f9;
  mov.b32 %r17, %f10;
  setp.ne.u32 %p2, %r16, %r17;
  @%p2 red.global.add.u32 [%rd1], 1;
  add.u32 %r6, %r6, %r8;
  bra LOOP;
DONE:
  ret;
}
)";

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class GuardedIEEE : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!haveGpu(why))
      GTEST_SKIP() << "GPU test skipped: " << why;
    CU_CHECK(cu::driver().cuDeviceGet(&dev, 0));
    CU_CHECK(cu::driver().cuDevicePrimaryCtxRetain(&primary, dev));
    CU_CHECK(cu::driver().cuCtxPushCurrent(primary));
    CU_CHECK(cu::driver().cuModuleLoadDataEx(&module, kPtx, 0, nullptr, nullptr));
    CU_CHECK(cu::driver().cuMemAlloc(&bad, 4));
  }
  void TearDown() override {
    if (bad)
      (void)cu::driver().cuMemFree(bad);
    if (module)
      (void)cu::driver().cuModuleUnload(module);
    if (primary) {
      cu::CUcontext popped = nullptr;
      (void)cu::driver().cuCtxPopCurrent(&popped);
      (void)cu::driver().cuDevicePrimaryCtxRelease(dev);
    }
  }
  /// Launches `name` with `args` (pointers to each parameter) and returns
  /// the mismatch count.
  uint32_t run(const char *name, std::vector<void *> args) {
    cu::CUfunction fn = nullptr;
    EXPECT_EQ(cu::driver().cuModuleGetFunction(&fn, module, name), cu::CUDA_SUCCESS);
    uint32_t zero = 0, count = ~0u;
    EXPECT_EQ(cu::driver().cuMemcpyHtoD(bad, &zero, 4), cu::CUDA_SUCCESS);
    args.push_back(&bad);
    EXPECT_EQ(cu::driver().cuLaunchKernel(fn, 132 * 16, 1, 1, 256, 1, 1, 0, nullptr,
                                          args.data(), nullptr),
              cu::CUDA_SUCCESS);
    EXPECT_EQ(cu::driver().cuCtxSynchronize(), cu::CUDA_SUCCESS);
    EXPECT_EQ(cu::driver().cuMemcpyDtoH(&count, bad, 4), cu::CUDA_SUCCESS);
    return count;
  }
  cu::CUdevice dev = 0;
  cu::CUcontext primary = nullptr;
  cu::CUmodule module = nullptr;
  cu::CUdeviceptr bad = 0;
};

TEST_F(GuardedIEEE, SqrtEqualsSqrtRnOnItsWholeDomain) {
  uint32_t start = bitsOf(0x1p-100f), count = bitsOf(0x1p100f) - start + 1;
  EXPECT_EQ(run("sqrt_domain", {&start, &count}), 0u);
}

TEST_F(GuardedIEEE, UniformDivisorEqualsDivRnOnTheWholeDomain) {
  std::vector<float> divisors = {1.0f, 2.0f, 0x1p-60f, 0x1p60f, 3.0f, 7.0f, 10.0f,
                                 0x1.fffffep0f, 0x1.000002p0f, 0x1.fffffep-60f,
                                 0x1.000002p59f, 1e-8f, 123456.7f};
  // Adam's bias corrections 1 - beta^t, as the runtime rounds them to f32.
  for (double beta : {0.9, 0.95, 0.999, 0.9999})
    for (int t : {1, 2, 3, 10, 1000})
      divisors.push_back(static_cast<float>(1.0 - std::pow(beta, t)));
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> mant(0, (1u << 23) - 1), expo(67, 186);
  while (divisors.size() < 40) {
    uint32_t u = (rng() & 0x80000000u) | (expo(rng) << 23) | mant(rng);
    float f;
    std::memcpy(&f, &u, 4);
    divisors.push_back(f);
  }
  uint32_t start = bitsOf(0x1p-60f), count = bitsOf(0x1p60f) - start + 1;
  for (float c : divisors)
    for (uint32_t sign : {0u, 0x80000000u})
      EXPECT_EQ(run("div_uniform", {&start, &count, &sign, &c}), 0u)
          << "divisor " << c << " (0x" << std::hex << bitsOf(c) << std::dec
          << "), numerator sign " << (sign ? '-' : '+');
}

TEST_F(GuardedIEEE, LaneDivisorEqualsDivRnOnRandomPairs) {
  // 0xF0000000 pairs: the grid-stride index never wraps past 2^32.
  uint32_t count = 0xF0000000u;
  for (uint32_t seed : {1u, 0x9e3779b9u})
    EXPECT_EQ(run("div_pairs", {&count, &seed}), 0u) << "seed " << seed;
}

} // namespace
