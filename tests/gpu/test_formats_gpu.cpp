// The host quantizer's e4m3 rounding against the GPU's conversion instruction, on every fp32 input.
#include <gtest/gtest.h>

#include <cstdio>

#include "mla/mla.h"
#include "testing/format_sweep.h"

namespace mla::testing {
namespace {

TEST(GpuFormats, E4m3EncoderMatchesTheHardwareOnEveryFloat) {
  if (!cuda_available()) GTEST_SKIP() << "no usable sm_90 CUDA device: GPU test skipped";
  SweepResult r;
  const Status s = e4m3_encoder_sweep(&r);
  ASSERT_TRUE(s.ok()) << s.message;
  char first[96];
  std::snprintf(first, sizeof(first), "first at fp32 bits 0x%08X: ours 0x%02X, GPU 0x%02X", r.first, r.ours, r.gpu);
  EXPECT_EQ(r.mismatches, 0u) << first;
}

}  // namespace
}  // namespace mla::testing
