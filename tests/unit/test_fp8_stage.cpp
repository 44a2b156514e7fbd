// The fp8 kernels' shared-memory tile layouts (src/kernels/sm90/fp8_stage.h; the TMA kernel's in
// namespace pairs): each a bijection onto the stage, the addresses the kernel computes equal
// kv_offset, and every access pattern the kernel issues is free of bank conflicts (16-byte accesses:
// 8 per wavefront, bank group = offset / 16 % 8); the pairs layout is what a TMA copy writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
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

// A layout (offset(r, c) of chunk c of row r) covers the stage exactly once.
template <typename Offset>
void expect_bijection(Offset offset) {
  std::vector<int> all;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kChunks; ++c) all.push_back(offset(r, c));
  }
  std::sort(all.begin(), all.end());
  for (int i = 0; i < int(all.size()); ++i) ASSERT_EQ(all[i], 16 * i);
}
// The accesses both layouts share are conflict-free: ldmatrix (K and V fragments), each matrix 8
// consecutive rows from a multiple of 8 at one chunk; row copies, 8 lanes per 128 bytes of one row
// (the last sweep: 4 chunks).
template <typename Offset>
void expect_ldmatrix_and_row_copies_conflict_free(Offset offset) {
  for (int r0 = 0; r0 < kRows; r0 += 8) {
    for (int c = 0; c < kChunks; ++c) {
      std::vector<int> m;
      for (int i = 0; i < 8; ++i) m.push_back(offset(r0 + i, c));
      EXPECT_TRUE(conflict_free(m)) << "rows " << r0 << "+, chunk " << c;
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c0 = 0; c0 < kChunks; c0 += 8) {
      std::vector<int> m;
      for (int c = c0; c < std::min(c0 + 8, kChunks); ++c) m.push_back(offset(r, c));
      EXPECT_TRUE(conflict_free(m)) << "row " << r << ", chunks " << c0 << "+";
    }
  }
}

TEST(Fp8Stage, KvOffsetIsABijectionOntoTheStage) {
  expect_bijection([](int r, int c) { return kv_offset(r, c); });
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
  expect_ldmatrix_and_row_copies_conflict_free([](int r, int c) { return kv_offset(r, c); });
  // Dense copies: 8 lanes per 128-byte line of the tile.
  for (int line = 0; line < kBytes / 128; ++line) {
    std::vector<int> m;
    for (int j = 0; j < 8; ++j) m.push_back(dense_offset(8 * line + j));
    EXPECT_TRUE(conflict_free(m)) << "line " << line;
  }
}

// A padded-free layout without the swizzle would conflict: the test can fail.
TEST(Fp8Stage, UnswizzledRowsWouldConflict) {
  std::vector<int> m;
  for (int i = 0; i < 8; ++i) m.push_back(i * kRowBytes);
  EXPECT_FALSE(conflict_free(m));
}

// The TMA kernel's layout.
TEST(Fp8StagePairs, KvOffsetIsABijectionOntoTheStage) {
  expect_bijection([](int r, int c) { return pairs::kv_offset(r, c); });
}

// The layout is the one a tensor-map copy with the 128-byte swizzle writes (boxes of 32 row pairs ×
// 128 bytes, at 1,024-byte aligned addresses), so TMA-copied and row-by-row tiles mix.
TEST(Fp8StagePairs, KvOffsetIsWhatTheTmaWrites) {
  static_assert(pairs::kBoxStride % pairs::kSwizzleAlign == 0, "every box starts a swizzle period");
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kChunks; ++c) {
      ASSERT_EQ(pairs::kv_offset(r, c), pairs::tma_offset(r / 2, kRowBytes * (r % 2) + 16 * c)) << r << ", " << c;
    }
  }
}

// The map backend.cu encodes: pair y is rows 2y, 2y + 1 of the cache; a box is what a tile's copy
// needs of every pair (9 boxes: the whole pair); the map ends at the last whole pair.
TEST(Fp8StagePairs, PairMapCoversTheCacheRowsExactly) {
  for (std::int64_t rows : {std::int64_t(2), std::int64_t(64), std::int64_t(4097), std::int64_t(1) << 22}) {
    const pairs::PairMapShape m = pairs::pair_map_shape(rows);
    EXPECT_EQ(m.pair_stride_bytes, std::uint64_t(2 * kRowBytes)) << "pair y starts at row 2y";
    EXPECT_EQ(m.pair_bytes, std::uint64_t(2 * kRowBytes));
    EXPECT_EQ(m.pairs * 2, std::uint64_t(rows - rows % 2));
    EXPECT_EQ(std::uint64_t(m.box_bytes) * pairs::kBoxes, m.pair_bytes);
    EXPECT_EQ(2 * m.box_pairs, std::uint32_t(kRows));
    EXPECT_EQ(std::uint64_t(m.box_bytes) * m.box_pairs * pairs::kBoxes, std::uint64_t(kBytes))
        << "the stage's transaction bytes";
  }
}

TEST(Fp8StagePairs, KernelAddressesAreKvOffset) {
  for (int warp = 0; warp < 4; ++warp) {
    for (int lane = 0; lane < 32; ++lane) {
      const int row = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
      ASSERT_EQ(pairs::k_row(lane, warp), row);
      for (int k = 0; k < kChunks; k += 2) {
        EXPECT_EQ(pairs::k_offset(lane, warp, k), pairs::kv_offset(row, k + lane / 16)) << lane << ", " << k;
      }
      for (int ks = 0; ks < 2; ++ks) {
        for (int mt = 0; mt < 8; ++mt)
          EXPECT_EQ(pairs::v_offset(lane, warp, ks, mt), pairs::kv_offset(32 * ks + lane, 4 * mt + warp))
              << lane << ", " << mt;
      }
    }
  }
}

TEST(Fp8StagePairs, SwizzleIsConflictFree) {
  expect_ldmatrix_and_row_copies_conflict_free([](int r, int c) { return pairs::kv_offset(r, c); });
}

}  // namespace
}  // namespace mla::sm90::fp8_stage
