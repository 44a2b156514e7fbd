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
#include "stage_checks.h"

namespace mla::sm90::fp8_stage {
namespace {

using stage_checks::conflict_free;
// The checks both fp8 layouts share, on this tile's rows and chunks.
template <typename Offset>
void expect_bijection(Offset offset) {
  stage_checks::expect_bijection(kRows, kChunks, offset);
}
template <typename Offset>
void expect_ldmatrix_and_row_copies_conflict_free(Offset offset) {
  stage_checks::expect_ldmatrix_and_row_copies_conflict_free(kRows, kChunks, offset);
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
      // decode_fp8.cu's row-by-row copies: rows 16w + lane / 8 + 4i, chunks lane % 8 + 8q.
      const int off0 = kv_offset(16 * warp + lane / 8, lane % 8);
      for (int i = 0; i < 4; ++i) {
        for (int q = 0; lane % 8 + 8 * q < kChunks; ++q) {
          EXPECT_EQ(row_copy_offset(off0, i, q), kv_offset(16 * warp + lane / 8 + 4 * i, lane % 8 + 8 * q))
              << warp << " " << lane << " " << i << " " << q;
        }
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
  static_assert(pairs::kBoxStride % kSwizzleAlign == 0, "every box starts a swizzle period");
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
    const TensorMapShape m = pairs::map_shape(rows);
    EXPECT_EQ(m.strides[0], std::uint64_t(2 * kRowBytes)) << "pair y starts at row 2y";
    EXPECT_EQ(m.strides[1], std::uint64_t(pairs::kBoxBytes)) << "the boxes of a pair are 128 bytes apart";
    EXPECT_EQ(m.dims[0] * m.dims[2], std::uint64_t(2 * kRowBytes)) << "the boxes are the whole pair";
    EXPECT_EQ(m.dims[1] * 2, std::uint64_t(rows - rows % 2));
    EXPECT_EQ(m.box[0], m.dims[0]);
    EXPECT_EQ(m.box[2], m.dims[2]);
    EXPECT_EQ(2 * m.box[1], std::uint32_t(kRows));
    EXPECT_EQ(std::uint64_t(m.box[0]) * m.box[1] * m.box[2], std::uint64_t(kBytes)) << "the stage's transaction bytes";
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

// e4m3x4_nan_bits and e4m3x4_nan_to_zero: every byte value at every position, the other bytes of every kind (a NaN of
// either sign, the largest finite codes, zero): NaN bytes become 0, all others stay.
TEST(Fp8Stage, NanBytesToZeroExactlyTheNanBytes) {
  const std::uint8_t others[] = {0x00, 0x7F, 0xFF, 0x7E, 0xFE, 0x80, 0x3C, 0x01};
  for (int pos = 0; pos < 4; ++pos) {
    for (int b = 0; b < 256; ++b) {
      for (std::uint8_t o : others) {
        std::uint32_t v = 0;
        for (int k = 0; k < 4; ++k) v |= std::uint32_t(k == pos ? b : o) << (8 * k);
        const std::uint32_t z = e4m3x4_nan_to_zero(v);
        for (int k = 0; k < 4; ++k) {
          const std::uint8_t in = std::uint8_t(v >> (8 * k)), out = std::uint8_t(z >> (8 * k));
          const bool nan = (in & 0x7F) == 0x7F;
          ASSERT_EQ(out, nan ? 0 : in) << "byte " << k << " of " << std::hex << v;
          ASSERT_EQ((e4m3x4_nan_bits(v) >> (8 * k)) & 0xFFu, nan ? 0x80u : 0u)
              << "byte " << k << " of " << std::hex << v;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mla::sm90::fp8_stage
