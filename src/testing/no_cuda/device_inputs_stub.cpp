// Built without CUDA: no device cases.
#include "testing/device_inputs.h"

namespace mla::testing {

Status upload(const HostInputs&, bool, std::unique_ptr<DeviceCase>*, std::size_t) {
  return {StatusCode::no_device, "mla was built without CUDA"};
}
Status run_in_graph(const Problem&, const Plan&, int) {
  return {StatusCode::no_device, "mla was built without CUDA"};
}
Status device_synchronize() {
  return {StatusCode::no_device, "mla was built without CUDA"};
}
Status current_device(int*, int*) {
  return {StatusCode::no_device, "mla was built without CUDA"};
}
Status set_device(int) {
  return {StatusCode::no_device, "mla was built without CUDA"};
}
DeviceMemory::~DeviceMemory() = default;
Status DeviceMemory::allocate(std::size_t) {
  return {StatusCode::no_device, "mla was built without CUDA"};
}
Status DeviceMemory::fill(std::uint8_t) {
  return {StatusCode::no_device, "mla was built without CUDA"};
}

}  // namespace mla::testing
