// DeviceCase: a HostInputs case on the GPU with NaN-filled (0xFF) guard bytes around every buffer.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "testing/cuda_fail.h"
#include "testing/device_inputs.h"

namespace mla::testing {
namespace {

struct Guarded {
  std::uint8_t* base = nullptr;  // guard | payload | guard
  std::size_t payload = 0;
  std::size_t guard = 0;
  std::uint8_t* data() const { return base + guard; }
};

class DeviceCaseImpl final : public DeviceCase {
 public:
  ~DeviceCaseImpl() override {
    for (Guarded& g : buffers_) cudaFree(g.base);
  }
  const Problem& problem() const override { return problem_; }

  Status alloc(const void* host, std::size_t bytes, std::size_t guard, Guarded* out) {
    Guarded g;
    g.payload = bytes;
    g.guard = guard;
    cudaError_t e = cudaMalloc(&g.base, bytes + 2 * guard);
    if (e != cudaSuccess) return fail("cudaMalloc", e);
    buffers_.push_back(g);
    e = cudaMemset(g.base, 0xFF, bytes + 2 * guard);
    if (e != cudaSuccess) return fail("cudaMemset", e);
    if (host != nullptr && bytes > 0) {
      e = cudaMemcpy(g.data(), host, bytes, cudaMemcpyHostToDevice);
      if (e != cudaSuccess) return fail("cudaMemcpy H2D", e);
    }
    *out = g;
    return Status::success();
  }

  Status poison_outputs() override {
    cudaError_t e = cudaMemset(out_.data(), 0xFF, out_.payload);
    if (e == cudaSuccess && lse_.base) e = cudaMemset(lse_.data(), 0xFF, lse_.payload);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    return e == cudaSuccess ? Status::success() : fail("poisoning outputs", e);
  }

  Status download(std::vector<std::uint16_t>* out, std::vector<float>* lse) const override {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return fail("synchronize before download", e);
    out->resize(out_.payload / 2);
    e = cudaMemcpy(out->data(), out_.data(), out_.payload, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return fail("downloading out", e);
    if (lse) {
      lse->clear();
      if (lse_.base) {
        lse->resize(lse_.payload / 4);
        e = cudaMemcpy(lse->data(), lse_.data(), lse_.payload, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) return fail("downloading lse", e);
      }
    }
    return Status::success();
  }

  Status guards_intact(bool* intact) const override {
    *intact = true;
    std::vector<std::uint8_t> h;
    for (const Guarded& g : buffers_) {
      h.resize(g.guard);
      for (const std::uint8_t* at : {g.base, g.base + g.guard + g.payload}) {
        cudaError_t e = cudaMemcpy(h.data(), at, g.guard, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) return fail("reading guards", e);
        for (std::uint8_t x : h) *intact = *intact && x == 0xFF;
      }
    }
    return Status::success();
  }

  Problem problem_;
  Guarded out_, lse_;
  std::vector<Guarded> buffers_;
};

}  // namespace

Status upload(const HostInputs& in, bool with_lse, std::unique_ptr<DeviceCase>* out, std::size_t guard) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return {StatusCode::no_device, "no CUDA device"};
  }
  auto dc = std::make_unique<DeviceCaseImpl>();
  Problem p = in.problem(nullptr, nullptr);
  Guarded g;
  Status s = dc->alloc(in.q.data(), in.q.size() * 2, guard, &g);
  if (!s.ok()) return s;
  p.q = reinterpret_cast<const std::uint16_t*>(g.data());
  s = dc->alloc(in.qo_indptr.data(), in.qo_indptr.size() * 4, guard, &g);
  if (!s.ok()) return s;
  p.qo_indptr = reinterpret_cast<const std::int32_t*>(g.data());
  s = dc->alloc(in.kv_indptr.data(), in.kv_indptr.size() * 4, guard, &g);
  if (!s.ok()) return s;
  p.kv_indptr = reinterpret_cast<const std::int32_t*>(g.data());
  s = dc->alloc(in.kv_data.data(), in.kv_data.size(), guard, &g);
  if (!s.ok()) return s;
  p.kv.data = g.data();
  if (p.kv.format == KvFormat::mxfp4) {
    s = dc->alloc(in.kv_scales.data(), in.kv_scales.size(), guard, &g);
    if (!s.ok()) return s;
    p.kv.scales = g.data();
  }
  if (p.paging.page_size != 0) {
    s = dc->alloc(in.page_table.data(), in.page_table.size() * 4, guard, &g);
    if (!s.ok()) return s;
    p.paging.page_table = reinterpret_cast<const std::int32_t*>(g.data());
  }
  const std::size_t rows = std::size_t(in.total_q) * kNumHeads;
  s = dc->alloc(nullptr, rows * kValueDim * 2, guard, &dc->out_);
  if (!s.ok()) return s;
  p.out = reinterpret_cast<std::uint16_t*>(dc->out_.data());
  p.lse = nullptr;
  if (with_lse) {
    s = dc->alloc(nullptr, rows * 4, guard, &dc->lse_);
    if (!s.ok()) return s;
    p.lse = reinterpret_cast<float*>(dc->lse_.data());
  }
  dc->problem_ = p;
  *out = std::move(dc);
  return Status::success();
}

Status run_in_graph(const Problem& p, const Plan& plan, int replays) {
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return fail("cudaStreamCreate", e);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Status result = Status::success();
  e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  if (e != cudaSuccess) {
    result = fail("cudaStreamBeginCapture", e);
  } else {
    Status s = run(p, plan, stream);
    e = cudaStreamEndCapture(stream, &graph);
    if (!s.ok()) {
      result = s;
    } else if (e != cudaSuccess) {
      result = fail("cudaStreamEndCapture (run() is not capturable)", e);
    } else if ((e = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess) {
      result = fail("cudaGraphInstantiate", e);
    } else {
      for (int i = 0; i < replays && e == cudaSuccess; ++i) e = cudaGraphLaunch(exec, stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) result = fail("graph replay", e);
    }
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return result;
}

Status device_synchronize() {
  cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? Status::success() : fail("cudaDeviceSynchronize", e);
}

Status current_device(int* device, int* count) {
  cudaError_t e = cudaGetDevice(device);
  if (e != cudaSuccess) return fail("cudaGetDevice", e);
  e = cudaGetDeviceCount(count);
  return e == cudaSuccess ? Status::success() : fail("cudaGetDeviceCount", e);
}

Status set_device(int device) {
  cudaError_t e = cudaSetDevice(device);
  return e == cudaSuccess ? Status::success() : fail("cudaSetDevice", e);
}

DeviceMemory::~DeviceMemory() {
  cudaFree(ptr_);
}

Status DeviceMemory::allocate(std::size_t bytes) {
  cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) return fail("cudaMalloc workspace", e);
  bytes_ = bytes;
  return Status::success();
}

Status DeviceMemory::fill(std::uint8_t byte) {
  cudaError_t e = cudaMemset(ptr_, byte, bytes_);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return e == cudaSuccess ? Status::success() : fail("filling device memory", e);
}

}  // namespace mla::testing
