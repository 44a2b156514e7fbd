// The bf16 kernels' shared-memory tile layouts (src/kernels/sm90/bf16_stage.h; the TMA kernel's in
// namespace boxes): each a bijection onto the stage, conflict-free for every access the kernel
// issues (16-byte accesses: 8 per wavefront), the TMA kernel's precomputed addresses equal to
// kv_offset, and the box layout exactly what a tensor-map copy with the 128-byte swizzle writes.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/sm90/bf16_stage.h"
#include "stage_checks.h"

namespace mla::sm90::bf16_stage {
namespace {

using stage_checks::conflict_free;

TEST(Bf16Stage, BothLayoutsAreBijectionsOntoTheStage) {
  stage_checks::expect_bijection(kRows, kChunks, [](int r, int c) { return row_offset(r, c); });
  stage_checks::expect_bijection(kRows, kChunks, [](int r, int c) { return boxes::kv_offset(r, c); });
}

TEST(Bf16Stage, BothLayoutsAreConflictFree) {
  stage_checks::expect_ldmatrix_and_row_copies_conflict_free(kRows, kChunks,
                                                             [](int r, int c) { return row_offset(r, c); });
  stage_checks::expect_ldmatrix_and_row_copies_conflict_free(kRows, kChunks,
                                                             [](int r, int c) { return boxes::kv_offset(r, c); });
}

// Without the XOR, the 8 rows of an ldmatrix matrix would share one bank group in either layout:
// the conflict checks can fail.
TEST(Bf16Stage, UnswizzledRowsWouldConflict) {
  std::vector<int> rows, box_rows;
  for (int i = 0; i < 8; ++i) {
    rows.push_back(i * kRowBytes);
    box_rows.push_back(i * boxes::kBoxBytes);
  }
  EXPECT_FALSE(conflict_free(rows));
  EXPECT_FALSE(conflict_free(box_rows));
}

// Every byte of the tile lands where the TMA's 128-byte swizzle puts it (boxes of 64 rows × 128
// bytes at 1,024-byte aligned addresses), so TMA-copied and row-by-row tiles mix.
TEST(Bf16StageBoxes, KvOffsetIsWhatTheTmaWrites) {
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kChunks; ++c) {
      for (int b = 0; b < 16; b += 15) {
        ASSERT_EQ(boxes::kv_offset(r, c) + b, boxes::tma_offset(r, 16 * c + b)) << r << ", " << c << ", " << b;
      }
    }
  }
  // The model: chunk bits XOR the 128-byte line's index mod 8, within each 1,024-byte period.
  EXPECT_EQ(tma_swizzle_128b(0), 0);
  EXPECT_EQ(tma_swizzle_128b(128), 128 + 16);
  EXPECT_EQ(tma_swizzle_128b(7 * 128 + 16 * 7 + 3), 7 * 128 + 3);
  EXPECT_EQ(tma_swizzle_128b(1024 + 128), 1024 + 128 + 16);
}

// The map backend.cu encodes: a row of the cache is 9 boxes of 128 bytes, rows a stride apart
// (padded rows too), the whole cache; one copy is the tile.
TEST(Bf16StageBoxes, MapCoversTheCacheRowsExactly) {
  for (std::int64_t stride : {std::int64_t(kRowBytes), std::int64_t(kRowBytes + 16), std::int64_t(2048)}) {
    for (std::int64_t rows : {std::int64_t(1), std::int64_t(64), std::int64_t(4097), std::int64_t(1) << 22}) {
      const TensorMapShape m = boxes::map_shape(rows, stride);
      EXPECT_EQ(m.dims[1], std::uint64_t(rows));
      EXPECT_EQ(m.strides[0], std::uint64_t(stride)) << "row y starts at byte stride · y";
      EXPECT_EQ(m.strides[1], std::uint64_t(boxes::kBoxBytes)) << "the boxes of a row are 128 bytes apart";
      EXPECT_EQ(m.dims[0] * m.dims[2], std::uint64_t(kRowBytes)) << "the boxes are the whole row";
      EXPECT_EQ(m.box[0], m.dims[0]);
      EXPECT_EQ(m.box[2], m.dims[2]);
      EXPECT_EQ(m.box[1], std::uint32_t(kRows));
      EXPECT_EQ(std::uint64_t(m.box[0]) * m.box[1] * m.box[2], std::uint64_t(kBytes))
          << "the stage's transaction bytes";
    }
  }
}

// The kernel's ldmatrix addresses (decode.cu: row and chunk as the cp.async kernels compute them)
// equal kv_offset: S for warp (tg, kh) = (w % 4, w / 4), k steps 0..17; P·V for warp w, kk 0..3.
TEST(Bf16StageBoxes, KernelAddressesAreKvOffset) {
  for (int warp = 0; warp < 8; ++warp) {
    const int tg = warp % 4, kh = warp / 4;
    for (int lane = 0; lane < 32; ++lane) {
      const int r = 16 * tg + lane % 8 + (lane / 16) * 8;
      ASSERT_EQ(boxes::s_row(lane, tg), r);
      for (int k = 0; k < 18; ++k) {
        const int chunk = (kh * 288 + ((lane / 8) % 2) * 8) / 8 + 2 * k;
        EXPECT_EQ(boxes::s_offset(lane, tg, kh, 0, k), boxes::kv_offset(r, chunk)) << lane << ", " << k;
        if (r + 16 < kRows) {  // np = 1 (tiles of more tokens per S warp): 16 rows further
          EXPECT_EQ(boxes::s_offset(lane, tg, kh, 1, k), boxes::kv_offset(r + 16, chunk)) << lane << ", " << k;
        }
      }
      for (int kk = 0; kk < 4; ++kk) {
        const int vr = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        for (int jj = 0; jj < 4; ++jj) {
          EXPECT_EQ(boxes::v_offset(lane, warp, kk, jj), boxes::kv_offset(vr, warp * 8 + 2 * jj + lane / 16))
              << lane << ", " << kk << ", " << jj;
        }
      }
    }
  }
}

// The pair kernel's ring: box_slot walks the slots from first_slot; at the top of tile t every box of
// the tile is in groups 0 .. t (the kernel waits for all but the newest, t + 1); each box goes into a
// slot whose previous box belongs to a tile that has retired when its group is issued (group g ≥ 2 goes
// out when tile g − 2 retires; groups 0 and 1 fill fresh slots); every slot is used.
TEST(Bf16Stage, RingSlotsAreFreeWhenWrittenAndFullWhenRead) {
  using namespace ring;
  constexpr int kTiles = 2000;
  std::vector<int> used(kSlots, 0);
  for (int u = 0; u < kTiles; ++u) {
    for (int b = 0; b < boxes::kBoxes; ++b) {
      const int n = boxes::kBoxes * u + b, slot = box_slot(first_slot(u), b), g = copy_group(u, b);
      ASSERT_EQ(slot, n % kSlots) << "tile " << u << " box " << b;
      ++used[slot];
      EXPECT_LE(g, u) << "tile " << u << " box " << b << ": not landed at the top of its tile";
      EXPECT_GE(g, 0);
      if (n < kSlots) {
        EXPECT_LE(g, 1) << "a fresh slot, filled by the prologue";
      } else {
        const int previous_tile = (n - kSlots) / boxes::kBoxes;
        EXPECT_GE(g, 2) << "tile " << u << " box " << b;
        EXPECT_LE(previous_tile, g - 2) << "tile " << u << " box " << b << ": its slot still holds tile "
                                        << previous_tile << " when group " << g << " goes out";
      }
    }
  }
  for (int s = 0; s < kSlots; ++s) EXPECT_GT(used[s], 0) << "slot " << s;
}

// The walking row-table kernel's schedule (namespace table), walked over chains of items as decode.cu
// runs them: the prologue copies the first item's tiles 0 and 1 directly and fills the table for its tile
// 2; at tile t the CTA issues copy_of's copy — from the table when the previous tile's fill_of named that
// very tile, else by direct lookups — and fills for the next copy; when an item starts, its tiles 0 and 1
// that no copy under the item before took go out directly. Every tile of every item must be copied once,
// and every copy that reads the table must read the rows filled for it. Chains of 1..6-tile items (the
// short ones, where the next copy can be the item after next's) and longer ones, random and exhaustive.
TEST(Bf16Stage, WalkingRowTableFillsEveryCopyThatReadsIt) {
  using namespace table;
  const auto walk = [](const std::vector<int>& chain, int* table_copies) {
    struct Ref {
      int item, tile;
      bool operator==(const Ref&) const = default;
    };
    std::vector<std::vector<int>> copied(chain.size());
    for (std::size_t i = 0; i < chain.size(); ++i) copied[i].assign(std::size_t(chain[i]), 0);
    const auto copy = [&](Ref r) { ++copied[std::size_t(r.item)][std::size_t(r.tile)]; };
    for (int k = 0; k < 2 && k < chain[0]; ++k) copy({0, k});
    bool table_ok = chain[0] > 2;  // the prologue's fill
    Ref filled{0, 2};
    for (std::size_t i = 0; i < chain.size(); ++i) {
      const int n = chain[i], next_n = i + 1 < chain.size() ? chain[i + 1] : 0;
      std::vector<bool> issued(2, false);  // the next item's tiles 0 and 1, copied under this item
      for (int t = 0; t < n; ++t) {
        const Tile c = copy_of(t, n, next_n);
        if (c.item >= 0) {
          const Ref r{int(i) + c.item, c.tile};
          if (c.item == 1 && c.tile < 2) issued[std::size_t(c.tile)] = true;
          if (table_ok) {
            EXPECT_TRUE(filled == r) << "tile " << t << " of item " << i << " copies item " << r.item << " tile "
                                     << r.tile << " from a table filled for item " << filled.item << " tile "
                                     << filled.tile;
            ++*table_copies;
          }
          copy(r);
        }
        const Tile f = fill_of(t, n, next_n);
        table_ok = f.item >= 0;
        filled = {int(i) + f.item, f.tile};
      }
      for (int k = 0; k < 2 && k < next_n; ++k) {
        if (!issued[std::size_t(k)]) copy({int(i) + 1, k});
      }
    }
    for (std::size_t i = 0; i < chain.size(); ++i) {
      for (int k = 0; k < chain[i]; ++k) EXPECT_EQ(copied[i][std::size_t(k)], 1) << "item " << i << " tile " << k;
    }
  };
  int table_copies = 0;
  // Every chain of three items of 1..6 tiles, then random chains with longer items among them.
  for (int a = 1; a <= 6; ++a) {
    for (int b = 1; b <= 6; ++b) {
      for (int c = 1; c <= 6; ++c) walk({a, b, c}, &table_copies);
    }
  }
  std::uint32_t x = 12345;
  for (int r = 0; r < 500; ++r) {
    std::vector<int> chain(1 + r % 7);
    for (int& n : chain) {
      x = x * 1664525u + 1013904223u;
      n = x >> 29 == 0 ? 16 + int(x >> 20) % 200 : 1 + int(x >> 24) % 6;
    }
    walk(chain, &table_copies);
  }
  EXPECT_GT(table_copies, 1000) << "the table serves most copies";
}

}  // namespace
}  // namespace mla::sm90::bf16_stage
