// The CUDA backend's host entry points (src/kernels/sm90/backend.cu, or the no-CUDA stub).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "host/planner.h"
#include "mla/mla.h"

namespace mla::cuda {

bool available();
Status workspace_size(const Problem& p, std::size_t* bytes);
Status plan(const Problem& p, void* workspace, std::size_t bytes, Plan* out);  // description validated
Status run(const Problem& p, const Plan& plan, void* stream);

// For measurement tools (bench/pace/), not the library's callers: what the planner works with on the
// current device for p's format, and plan() with a given work list in place of the planner's choice.
struct ListSetting {
  int sms = 0;
  int slots = 0;      // SMs × resident decode CTAs per SM
  int tile = 0;       // KV tokens per tile
  int max_items = 0;  // the workspace layout's room
};
Status list_setting(const Problem& p, ListSetting* out);
// plan(), and the list it launches (before any cluster layout) with its walking grid (0: one CTA per
// item): what plan_with_list(p, *list, lengths, *grid, …) plans again.
Status plan_and_list(const Problem& p, void* workspace, std::size_t bytes, Plan* out, WorkList* list, int* grid);
// `wl`: a list of p's rows (a virtual request per q row, `lengths` their visible keys), as the planner's
// lists are; clusters, TMA and kv bases as plan() decides for it. `grid` below its items (bf16 only):
// that many CTAs walk it, CTA c from item c by WorkItem::next (every item taken once); else one CTA per
// item (`next` cleared).
Status plan_with_list(const Problem& p, const WorkList& wl, std::span<const std::int32_t> lengths, int grid,
                      void* workspace, std::size_t bytes, Plan* out);

}  // namespace mla::cuda
