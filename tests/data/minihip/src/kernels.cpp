// minihip kernels: one plain kernel and one whose only hostcall use is a device assert() on a runtime
// value. Built with NDEBUG the assert compiles away and neither kernel declares hidden_hostcall_buffer;
// without it, mh_assert declares it (tests/it/build.rs checks both).
#include <cassert>
#include <hip/hip_runtime.h>

extern "C" __global__ void mh_plain(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i] + 1.0f;
}

extern "C" __global__ void mh_assert(int* out, const int* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    assert(in[i] >= 0);
    out[i] = in[i] + 1;
  }
}

// Host entry points so the library looks like a library.
extern "C" int minihip_launch_plain(float* out, const float* in, int n) {
  hipLaunchKernelGGL(mh_plain, dim3((n + 255) / 256), dim3(256), 0, 0, out, in, n);
  return static_cast<int>(hipGetLastError());
}

extern "C" int minihip_launch_assert(int* out, const int* in, int n) {
  hipLaunchKernelGGL(mh_assert, dim3((n + 255) / 256), dim3(256), 0, 0, out, in, n);
  return static_cast<int>(hipGetLastError());
}
