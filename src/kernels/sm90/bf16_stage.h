// The shared-memory layouts of one 64-token bf16 tile in decode.cu — plain arithmetic, host and
// device, so that the unit tests (tests/unit/test_bf16_stage.cpp) check them without a GPU.
//
// cp.async kernels: rows of 1,152 bytes, one after another; 16-byte chunk c of row r at
// row_offset(r, c) = 1152r + 16·(c ^ (r % 8)). The XOR keeps each 128-byte line whole and puts the
// 8 rows of an ldmatrix matrix (one chunk, rows r0 .. r0 + 7) in 8 distinct bank groups.
//
// The TMA kernel (plans of long items, Plan::kv_tma) takes namespace `boxes` instead: the tile cut
// into 9 boxes of 64 rows × 128 bytes, box-major — box b holds bytes 128b .. 128b + 127 of every row,
// 8 KB — with the chunks of row r XOR-swizzled by r % 8. That is what one 3-D tensor-map copy with
// the 128-byte swizzle writes (inner 128 bytes, 64 rows, 9 boxes 128 bytes apart) at a 1,024-byte
// aligned address: the XOR key stays r % 8, only the strides change (row 128 bytes, box 8 KB).
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/sm90/tensor_map_shape.h"

namespace mla::sm90::bf16_stage {

constexpr int kRowBytes = 1152;  // bf16 KV row: 576 dims
constexpr int kRows = 64;        // tokens per tile
constexpr int kChunks = kRowBytes / 16;
constexpr int kBytes = kRows * kRowBytes;

// Byte offset of 16-byte chunk c of tile row r (cp.async kernels).
MLA_HD constexpr int row_offset(int r, int c) {
  return r * kRowBytes + 16 * (c ^ (r & 7));
}

namespace boxes {

constexpr int kBoxBytes = 128;                 // a box's width: the 128-byte swizzle's span
constexpr int kBoxes = kRowBytes / kBoxBytes;  // 9
constexpr int kBoxStride = kRows * kBoxBytes;  // 8,192 bytes per box
static_assert(kRowBytes % kBoxBytes == 0 && kBoxes * kBoxStride == kBytes, "whole boxes, no padding");
static_assert(kBoxStride % kSwizzleAlign == 0, "every box starts a swizzle period");
constexpr int k16Rows = 16 * kBoxBytes;  // 16 rows further in every box: an m16 / k16 step of the ldmatrix

// Byte offset of 16-byte chunk c of tile row r.
MLA_HD constexpr int kv_offset(int r, int c) {
  return kBoxStride * (c >> 3) + kBoxBytes * r + 16 * ((c & 7) ^ (r & 7));
}
// Where the TMA's 128-byte swizzle puts byte `byte` of row r: the box-major image (box z, row r,
// byte x at 8192z + 128r + x), swizzled. kv_offset must agree with it (the unit tests).
MLA_HD constexpr int tma_offset(int r, int byte) {
  return tma_swizzle_128b(kBoxStride * (byte / kBoxBytes) + kBoxBytes * r + byte % kBoxBytes);
}

// The tensor map's geometry (backend.cu encodes it into DecodeParams::kv_map): the cache as
// (byte of a box, row, box), rows `row_stride` bytes apart (padding allowed), the boxes 128 bytes
// apart within a row; one copy is a tile's 64 rows × 128 bytes × 9 boxes, landing box-major.
MLA_HD constexpr TensorMapShape map_shape(std::int64_t rows, std::int64_t row_stride) {
  return {{std::uint64_t(kBoxBytes), std::uint64_t(rows), std::uint64_t(kBoxes)},
          {std::uint64_t(row_stride), std::uint64_t(kBoxBytes)},
          {std::uint32_t(kBoxBytes), std::uint32_t(kRows), std::uint32_t(kBoxes)}};
}

// ldmatrix of the K fragments (S = Q·Kᵀ): warp (tg, kh) reads rows 16tg + 16np + lane % 8 +
// 8·(lane / 16), chunk 36kh + 2k + (lane / 8) % 2 for k step k (0..17). With k = 4a + m the offset is
// 8192a + 2048np (constants of the unrolled loops) plus s_base(lane, tg, kh, m): four values per
// thread.
MLA_HD constexpr int s_row(int lane, int tg) {
  return 16 * tg + lane % 8 + 8 * (lane / 16);
}
MLA_HD constexpr int s_base(int lane, int tg, int kh, int m) {
  return kv_offset(s_row(lane, tg), 36 * kh + 2 * m + (lane / 8) % 2);
}
MLA_HD constexpr int s_offset(int lane, int tg, int kh, int np, int k) {
  return kBoxStride * (k / 4) + k16Rows * np + s_base(lane, tg, kh, k % 4);
}
// ldmatrix.trans of the V fragments (O += P·V): warp w reads rows 16kk + lane % 8 + 8·((lane / 8) % 2),
// chunk 8w + 2jj + lane / 16 — box w. The offset is 2048kk plus v_base(lane, w, jj): four values per
// thread.
MLA_HD constexpr int v_row(int lane) {
  return lane % 8 + 8 * ((lane / 8) % 2);
}
MLA_HD constexpr int v_base(int lane, int warp, int jj) {
  return kv_offset(v_row(lane), 8 * warp + 2 * jj + lane / 16);
}
MLA_HD constexpr int v_offset(int lane, int warp, int kk, int jj) {
  return k16Rows * kk + v_base(lane, warp, jj);
}

}  // namespace boxes

// The row-pair kernel's ring (decode_bf16_pairs.cu): kSlots slots of one box each (boxes' layout, 64
// rows × 128 bytes), box b of tile t in slot (9t + b) % kSlots. When tile t retires, its 9 slots take
// the boxes kSlots ahead: the rest (boxes ≥ kHead) of tile t + 2 and the head (boxes < kHead) of tile
// t + 3, one cp.async group; the prologue's two groups are tile 0, then tile 1 and the head of tile 2.
// At the top of tile t the kernel waits for all groups but the newest — groups 0 .. t — so every box of
// tile t must be in one of them (copy_group; tests/unit/test_bf16_stage.cpp checks that, and that no
// slot is written before the tile that held it retired).
namespace ring {

constexpr int kSlots = 21;                         // (the k-split pair kernel's exchange takes two slots' room)
constexpr int kHead = kSlots - 2 * boxes::kBoxes;  // 3
static_assert(kHead > 0 && kHead < boxes::kBoxes, "the ring holds two tiles and part of a third");

MLA_HD constexpr int first_slot(int tile) {
  return boxes::kBoxes * tile % kSlots;
}
// The slot of box b < 9 of the tile whose first_slot is slot0.
MLA_HD constexpr int box_slot(int slot0, int b) {
  return slot0 + b >= kSlots ? slot0 + b - kSlots : slot0 + b;
}
// The cp.async group, in commit order, that copies box b of tile u: 0 (tile 0), 1 (tile 1, the head of
// tile 2), then 2 + t for what tile t's retirement issues.
MLA_HD constexpr int copy_group(int u, int b) {
  if (u == 0) return 0;
  if (u == 1 || (u == 2 && b < kHead)) return 1;
  return b < kHead ? u - 1 : u;  // a head goes out when tile u − 3 retires, a rest when u − 2 does
}

}  // namespace ring

// The row table of the walking kernel of pages of 1 row (decode.cu, kTable; perf-notes v156). At its tile
// t of an item of `tiles` tiles, a walking CTA copies tile t + 2 — the item's own, or past its end the
// next item's tile t + 2 − tiles (copy_of; the next item's tiles 0 and 1 that no such copy took go out
// when that item starts) — and fills the table for the copy of its tile after, tile t + 3 in the same
// sense (fill_of): nothing when that tile is the item after next's, not known yet, and that copy then
// looks its rows up directly. The kernel states the same rules in its own terms (ahead, k_next, table_t0:
// so that its measured code stays as it was; forms calling these spilled or took 152 more instructions);
// the unit tests walk chains of items through them.
namespace table {

struct Tile {
  int item;  // 0: this item, 1: the next one, −1: none (past the next item's tiles)
  int tile;
};
MLA_HD constexpr Tile ahead(int k, int tiles, int next_tiles) {
  if (k < tiles) return {0, k};
  if (k - tiles < next_tiles) return {1, k - tiles};
  return {-1, 0};
}
MLA_HD constexpr Tile copy_of(int t, int tiles, int next_tiles) {
  return ahead(t + 2, tiles, next_tiles);
}
MLA_HD constexpr Tile fill_of(int t, int tiles, int next_tiles) {
  return ahead(t + 3, tiles, next_tiles);
}

}  // namespace table
}  // namespace mla::sm90::bf16_stage
