// Built when no CUDA toolkit was found: Backend::cuda reports no_device.
#include "host/cuda_backend.h"

namespace mla::cuda {
namespace {
Status none() {
  return {StatusCode::no_device, "mla was built without CUDA (no nvcc found at configure time)"};
}
}  // namespace

bool available() {
  return false;
}
Status workspace_size(const Problem&, std::size_t*) {
  return none();
}
Status plan(const Problem&, void*, std::size_t, Plan*) {
  return none();
}
Status run(const Problem&, const Plan&, void*) {
  return none();
}
Status plan_and_list(const Problem&, void*, std::size_t, Plan*, WorkList*, int*) {
  return none();
}
Status list_setting(const Problem&, ListSetting*) {
  return none();
}
Status plan_with_list(const Problem&, const WorkList&, std::span<const std::int32_t>, int, void*, std::size_t, Plan*) {
  return none();
}

}  // namespace mla::cuda
