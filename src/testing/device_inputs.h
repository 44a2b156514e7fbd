// A HostInputs case copied to the GPU, every buffer surrounded by NaN-filled guard bytes
// (0xFF: bf16/fp32 NaN, e4m3 NaN, E8M0 NaN) so that any read outside it poisons the result, and
// any write outside it is detected by guards_intact(). Built only with CUDA; without it
// upload() returns no_device.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "mla/mla.h"
#include "testing/inputs.h"

namespace mla::testing {

class DeviceCase {
 public:
  virtual ~DeviceCase() = default;
  // The problem over device memory (out and, if requested, lse point into guarded buffers).
  virtual const Problem& problem() const = 0;
  virtual Status poison_outputs() = 0;  // fill out and lse with NaN
  virtual Status download(std::vector<std::uint16_t>* out, std::vector<float>* lse) const = 0;
  virtual Status guards_intact(bool* intact) const = 0;  // no byte around any buffer changed
};

// guard_bytes: padding before and after each buffer (a multiple of 256 keeps alignment).
Status upload(const HostInputs& in, bool with_lse, std::unique_ptr<DeviceCase>* out, std::size_t guard_bytes = 4096);

// Captures mla::run(p, plan, stream) into a CUDA graph on a fresh stream, replays it `replays`
// times and synchronizes — the check that run() is capturable (no sync, no allocation).
Status run_in_graph(const Problem& p, const Plan& plan, int replays);

// cudaDeviceSynchronize with the error turned into a Status (sticky kernel faults surface here).
Status device_synchronize();

// The current CUDA device and how many there are (cudaGetDevice, cudaGetDeviceCount), and making
// another current (cudaSetDevice): the tests' only direct device calls, here so that they build
// without the CUDA toolkit.
Status current_device(int* device, int* count);
Status set_device(int device);

// A plain device allocation (workspace), freed on destruction.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  Status allocate(std::size_t bytes);
  Status fill(std::uint8_t byte);  // every byte (0xFF: NaN in every format), synchronously
  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace mla::testing
