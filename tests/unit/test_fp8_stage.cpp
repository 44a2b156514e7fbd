// The fp8 kernel's shared-memory tile layout (src/kernels/sm90/fp8_stage.h): a bijection onto the
// stage, the addresses the kernel computes equal kv_offset, and every access pattern the kernel
// issues is free of bank conflicts (16-byte accesses: 8 per wavefront, bank group = offset / 16 % 8).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "kernels/sm90/fp8_stage.h"

namespace mla::sm90::fp8_stage {
namespace {

int group(int offset) {
  return (offset / 16) % 8;
}
// 8 accesses of 16 bytes: one wavefront when their bank groups are distinct.
bool conflict_free(const std::vector<int>& offsets) {
  std::set<int> groups;
  for (int o : offsets) groups.insert(group(o));
  return groups.size() == offsets.size();
}

TEST(Fp8Stage, KvOffsetIsABijectionOntoTheStage) {
  std::vector<int> all;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kChunks; ++c) all.push_back(kv_offset(r, c));
  }
  std::sort(all.begin(), all.end());
  for (int i = 0; i < int(all.size()); ++i) ASSERT_EQ(all[i], 16 * i);
}

TEST(Fp8Stage, KernelAddressesAreKvOffset) {
  for (int n = 0; n < kBytes / 16; ++n) EXPECT_EQ(dense_offset(n), kv_offset(n / kChunks, n % kChunks)) << n;
  for (int warp = 0; warp < 4; ++warp) {
    for (int lane = 0; lane < 32; ++lane) {
      const int row = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
      for (int k = 0; k < kChunks; k += 2) {
        EXPECT_EQ(row * kRowBytes + k_chunk_offset(lane, k), kv_offset(row, k + lane / 16));
      }
      for (int ks = 0; ks < 2; ++ks) {
        for (int mt = 0; mt < 8; ++mt)
          EXPECT_EQ(v_offset(lane, warp, ks, mt), kv_offset(32 * ks + lane, 4 * mt + warp));
      }
    }
  }
}

TEST(Fp8Stage, SwizzleIsConflictFree) {
  // ldmatrix (K and V fragments): each matrix is 8 consecutive rows from a multiple of 8 at one chunk.
  for (int r0 = 0; r0 < kRows; r0 += 8) {
    for (int c = 0; c < kChunks; ++c) {
      std::vector<int> m;
      for (int i = 0; i < 8; ++i) m.push_back(kv_offset(r0 + i, c));
      EXPECT_TRUE(conflict_free(m)) << "rows " << r0 << "+, chunk " << c;
    }
  }
  // Dense copies: 8 lanes per 128-byte line of the tile.
  for (int line = 0; line < kBytes / 128; ++line) {
    std::vector<int> m;
    for (int j = 0; j < 8; ++j) m.push_back(dense_offset(8 * line + j));
    EXPECT_TRUE(conflict_free(m)) << "line " << line;
  }
  // Row copies: 8 lanes per 128 bytes of one row (the last sweep: 4 chunks).
  for (int r = 0; r < kRows; ++r) {
    for (int c0 = 0; c0 < kChunks; c0 += 8) {
      std::vector<int> m;
      for (int c = c0; c < std::min(c0 + 8, kChunks); ++c) m.push_back(kv_offset(r, c));
      EXPECT_TRUE(conflict_free(m)) << "row " << r << ", chunks " << c0 << "+";
    }
  }
}

// A padded-free layout without the swizzle would conflict: the test can fail.
TEST(Fp8Stage, UnswizzledRowsWouldConflict) {
  std::vector<int> m;
  for (int i = 0; i < 8; ++i) m.push_back(i * kRowBytes);
  EXPECT_FALSE(conflict_free(m));
}

}  // namespace
}  // namespace mla::sm90::fp8_stage
