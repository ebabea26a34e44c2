#include "pipeplan/torch_ext/cuda_copy.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <string>

namespace pipeplan::torch_ext {

runtime::CopyBytes CudaDeviceCopy(int device, std::mutex* shared_device) {
  return
      [device, shared_device](std::span<std::byte> to, std::span<const std::byte> from) -> Status {
        std::unique_lock<std::mutex> hold;
        if (shared_device != nullptr) hold = std::unique_lock(*shared_device);
        const auto index = static_cast<c10::DeviceIndex>(device);
        const c10::cuda::CUDAGuard guard(index);
        const cudaError_t error =
            cudaMemcpyAsync(to.data(), from.data(), to.size(), cudaMemcpyDeviceToDevice,
                            c10::cuda::getCurrentCUDAStream(index).stream());
        if (error == cudaSuccess) return Status::Ok();
        return Internal(std::string("cudaMemcpyAsync: ") + cudaGetErrorString(error));
      };
}

}  // namespace pipeplan::torch_ext
