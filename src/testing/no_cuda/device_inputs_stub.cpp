// Built without CUDA: no device cases.
#include "testing/device_inputs.h"

namespace mla::testing {
namespace {
Status no_cuda() {
  return {StatusCode::no_device, "mla was built without CUDA"};
}
}  // namespace

Status upload(const HostInputs&, bool, std::unique_ptr<DeviceCase>*, std::size_t) {
  return no_cuda();
}
Status run_in_graph(const Problem&, const Plan&, int) {
  return no_cuda();
}
Status device_synchronize() {
  return no_cuda();
}
Status current_device(int*, int*) {
  return no_cuda();
}
Status set_device(int) {
  return no_cuda();
}
DeviceMemory::~DeviceMemory() = default;
Status DeviceMemory::allocate(std::size_t) {
  return no_cuda();
}
Status DeviceMemory::fill(std::uint8_t) {
  return no_cuda();
}

}  // namespace mla::testing
