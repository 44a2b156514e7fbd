// The shared-memory layout of one 64-token fp8 tile in decode_fp8.cu — plain arithmetic, host and
// device, so that the unit tests (tests/unit/test_fp8_stage.cpp) check it without a GPU.
//
// Rows are unpadded (576 bytes, as stored: a stage is the tile's 36,864 bytes); 16-byte chunk c of
// row r sits at kv_offset(r, c) = 576r + 16·(c ^ f(r)), f(r) = (r / 2) % 4. The XOR flips the
// chunk's two low bits only, so every 128-byte line of the tile stays one line of the stage (a
// whole-line copy by 8 lanes hits 8 distinct bank groups), and the 8 rows of an ldmatrix matrix at
// one chunk land in 8 distinct bank groups (rows 2m and 2m + 1 are 36 chunks ≡ 4 groups apart; the
// row pairs' f differ).
//
// The kernel for long items (whole tiles by TMA, perf-notes v113) takes the layout of namespace
// `pairs` below instead, which a tensor-map copy can write.
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/sm90/tensor_map_shape.h"

namespace mla::sm90::fp8_stage {

constexpr int kRowBytes = 576;  // e4m3 KV row
constexpr int kRows = 64;       // tokens per tile
constexpr int kChunks = kRowBytes / 16;
constexpr int kBytes = kRows * kRowBytes;

MLA_HD constexpr int swizzle(int r) {
  return (r >> 1) & 3;
}
// Byte offset of 16-byte chunk c of tile row r.
MLA_HD constexpr int kv_offset(int r, int c) {
  return r * kRowBytes + 16 * (c ^ swizzle(r));
}
// A dense tile copied linearly: piece n (bytes 16n .. 16n + 15 of the tile) = chunk n % 36 of row
// n / 36, whose f is (n / 72) % 4.
MLA_HD constexpr int dense_offset(int n) {
  return (16 * n) ^ (((n / (2 * kChunks)) & 3) << 4);
}
// A row-by-row copy (8 lanes a row, 4 rows of a warp at a time): chunk c0 + 8q (c0 < 8) of row
// r0 + 4i (r0 % 4 < 4 rows of a 4-aligned block), given off0 = kv_offset(r0, c0) — f(r0 + 4i) =
// f(r0) ^ 2·(i % 2) flips the chunk's bit 1, which is bit 5 of the offset (576r and 128q are multiples
// of 64 and leave it alone).
MLA_HD constexpr int row_copy_offset(int off0, int i, int q) {
  return (off0 ^ (32 * (i & 1))) + 4 * kRowBytes * i + 128 * q;
}
// ldmatrix of the K fragments (S): lane's row 16w + lane % 8 + 8·((lane / 8) % 2), chunk k + lane / 16
// for an even k — f(row) = (lane / 2) % 4, so the chunk is (k & ~3) + (((k & 2) | lane / 16) ^ f):
// the offset from the row's start, two values per lane.
MLA_HD constexpr int k_chunk_offset(int lane, int k) {
  return 16 * (k & ~3) + 16 * (((k & 2) | (lane / 16)) ^ ((lane >> 1) & 3));
}
// ldmatrix.trans of the V fragments (P·V): row 32ks + lane, chunk 4mt + w: f(row) = (lane / 2) % 4
// flips only w's bits.
MLA_HD constexpr int v_offset(int lane, int warp, int ks, int mt) {
  return (32 * ks + lane) * kRowBytes + 64 * mt + 16 * (warp ^ ((lane >> 1) & 3));
}

// Four stored e4m3 bytes: bit 7 of each byte that is a NaN (S.1111.111), the rest 0 — bit 7 of
// (b & 0x7F) + 1 is set exactly for b & 0x7F = 0x7F, and no byte carries into the next; and the four
// bytes with every NaN set to +0, the others kept. The row-pair kernel applies them to the pair's
// last key's V (decode_fp8.cu, last_key_v_nan_to_zero).
MLA_HD constexpr std::uint32_t e4m3x4_nan_bits(std::uint32_t v) {
  return ((v & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
}
MLA_HD constexpr std::uint32_t e4m3x4_nan_to_zero(std::uint32_t v) {
  return v & ~((e4m3x4_nan_bits(v) >> 7) * 0xFFu);
}

// The layout of the TMA kernel: the tile as 32 row pairs of 1,152 bytes (9 whole 128-byte lines when
// the pair starts at an even row), cut into 9 boxes of 128 bytes per pair: box b holds bytes
// 128b .. 128b + 127 of every pair, 32 pairs × 128 bytes = 4 KB, its 16-byte chunks XOR-swizzled by
// the pair's index mod 8 — exactly what one 3-D tensor-map copy with the 128-byte swizzle writes for
// boxes of 32 pairs × 128 bytes at a 1,024-byte aligned address. Chunk c of row r (r = 2P + h) is
// byte 576h + 16c of pair P, so it sits at
//   kv_offset(r, c) = 4096·(x / 8) + 128·P + 16·((x % 8) ^ (P % 8)),  x = 36h + c.
// The 8 rows of an ldmatrix matrix (rows r0 .. r0 + 7, r0 a multiple of 8, one chunk) hit 8 distinct
// bank groups (4 pairs of consecutive P; the two rows of a pair 4 chunks apart), and so do the 8
// lanes of a row copy (one row, 8 consecutive chunks).
namespace pairs {

constexpr int kPairBytes = 2 * kRowBytes;       // 1152: 9 lines
constexpr int kPairs = kRows / 2;               // 32
constexpr int kBoxBytes = 128;                  // a box's width: the 128-byte swizzle's span
constexpr int kBoxes = kPairBytes / kBoxBytes;  // 9
constexpr int kBoxStride = kPairs * kBoxBytes;  // 4096 bytes per box
static_assert(kPairBytes % kBoxBytes == 0, "whole boxes per pair");
static_assert(kBoxes * kBoxStride == kBytes, "the boxes are the tile, no padding");

// The pair map's geometry (backend.cu encodes it into DecodeParams::kv_map): the cache of unpadded
// rows as (byte of a box, pair, box), pair y starting at row 2y's first byte, the boxes 128 bytes
// apart within a pair; one copy is a tile's 32 pairs × 128 bytes × 9 boxes, landing box-major.
MLA_HD constexpr TensorMapShape map_shape(std::int64_t rows) {
  return {{std::uint64_t(kBoxBytes), std::uint64_t(rows / 2), std::uint64_t(kBoxes)},
          {std::uint64_t(kPairBytes), std::uint64_t(kBoxBytes)},
          {std::uint32_t(kBoxBytes), std::uint32_t(kPairs), std::uint32_t(kBoxes)}};
}

// Byte offset of 16-byte chunk c of tile row r.
MLA_HD constexpr int kv_offset(int r, int c) {
  const int p = r >> 1, x = 36 * (r & 1) + c;
  return kBoxStride * (x >> 3) + kBoxBytes * p + 16 * ((x & 7) ^ (p & 7));
}
// Where the TMA's 128-byte swizzle puts byte `byte` of pair p: the box-major image (box z, pair p,
// byte x at 4096z + 128p + x), swizzled. kv_offset must agree with it (the unit tests).
MLA_HD constexpr int tma_offset(int p, int byte) {
  return tma_swizzle_128b(kBoxStride * (byte / kBoxBytes) + kBoxBytes * p + byte % kBoxBytes);
}
// ldmatrix of the K fragments (S): lane's row 16w + lane % 8 + 8·((lane / 8) % 2), chunk k + lane / 16
// for an even k. Its offset is 4096·(k / 8) (a constant of the unrolled step) plus k_base(lane, k % 8):
// four values per thread, one per even k % 8.
MLA_HD constexpr int k_row(int lane, int warp) {
  return 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
}
MLA_HD constexpr int k_base(int lane, int warp, int k7) {
  return kv_offset(k_row(lane, warp), k7 + lane / 16);
}
MLA_HD constexpr int k_offset(int lane, int warp, int k) {
  return kBoxStride * (k / 8) + k_base(lane, warp, k % 8);
}
// ldmatrix.trans of the V fragments (P·V): row 32ks + lane, chunk 4mt + w. Its offset is
// 4096·(mt / 2) + 2048·ks (constants of the unrolled loops) plus v_base(lane, warp, mt % 2): two
// values per thread.
MLA_HD constexpr int v_base(int lane, int warp, int mt2) {
  return kv_offset(lane, 4 * mt2 + warp);
}
constexpr int kVStepBytes = 16 * kBoxBytes;  // a P·V k step's 32 rows: 16 pairs further in every box
MLA_HD constexpr int v_offset(int lane, int warp, int ks, int mt) {
  return kBoxStride * (mt / 2) + kVStepBytes * ks + v_base(lane, warp, mt % 2);
}

}  // namespace pairs
}  // namespace mla::sm90::fp8_stage
