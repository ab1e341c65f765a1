// A library whose only kernel declares no hostcall: no assert(), no printf, no indirect call.
// `cargo xtask doctor-fixtures` compiles it to tests/data/doctor/plain-gfx1100.so, the "library
// scans clean" input of the doctor tests (no AtomicOps, clean library → not this bug).
#include <hip/hip_runtime.h>

extern "C" __global__ void k_axpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
