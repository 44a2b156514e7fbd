// Validation of a Problem, split into what needs no reading of its arrays (description) and what
// reads indptr and the page table (contents, host copies).
#pragma once

#include <cstdint>

#include "mla/mla.h"

namespace mla {

// Shapes, nulls, enums, strides, 64-bit byte offsets; for Backend::cuda also alignment.
Status validate_description(const Problem& p, Backend backend);

// indptr and page-table contents; the three arrays are host copies of the problem's
// ([B+1], [B+1], [page_table_entries]; page_table may be null when not paged).
Status validate_contents(const Problem& p, const std::int32_t* qo_indptr, const std::int32_t* kv_indptr,
                         const std::int32_t* page_table);

}  // namespace mla
