// Checks shared by the stage-layout tests (test_fp8_stage.cpp, test_bf16_stage.cpp): a layout is
// offset(r, c), the byte offset of 16-byte chunk c of tile row r in the stage.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace mla::sm90::stage_checks {

// The bank group (of 8) of a 16-byte access.
inline int group(int offset) {
  return (offset / 16) % 8;
}
// 8 accesses of 16 bytes: one wavefront when their bank groups are distinct.
inline bool conflict_free(const std::vector<int>& offsets) {
  std::set<int> groups;
  for (int o : offsets) groups.insert(group(o));
  return groups.size() == offsets.size();
}

// A layout covers the stage of rows × chunks chunks exactly once.
template <typename Offset>
void expect_bijection(int rows, int chunks, Offset offset) {
  std::vector<int> all;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < chunks; ++c) all.push_back(offset(r, c));
  }
  std::sort(all.begin(), all.end());
  for (int i = 0; i < int(all.size()); ++i) ASSERT_EQ(all[i], 16 * i);
}

// ldmatrix (each matrix 8 consecutive rows from a multiple of 8 at one chunk) and row copies (8
// lanes per 128 bytes of one row; the last sweep may be shorter) are conflict-free.
template <typename Offset>
void expect_ldmatrix_and_row_copies_conflict_free(int rows, int chunks, Offset offset) {
  for (int r0 = 0; r0 < rows; r0 += 8) {
    for (int c = 0; c < chunks; ++c) {
      std::vector<int> m;
      for (int i = 0; i < 8; ++i) m.push_back(offset(r0 + i, c));
      EXPECT_TRUE(conflict_free(m)) << "rows " << r0 << "+, chunk " << c;
    }
  }
  for (int r = 0; r < rows; ++r) {
    for (int c0 = 0; c0 < chunks; c0 += 8) {
      std::vector<int> m;
      for (int c = c0; c < std::min(c0 + 8, chunks); ++c) m.push_back(offset(r, c));
      EXPECT_TRUE(conflict_free(m)) << "row " << r << ", chunks " << c0 << "+";
    }
  }
}

}  // namespace mla::sm90::stage_checks
