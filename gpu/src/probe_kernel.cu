// The speed probe's kernel: C = A * B for row-major N x N FP32 matrices, N a multiple of 32,
// tiled through shared memory in 32 x 32 blocks, one output element per thread. Launched with
// a 32 x 32 block and an (N/32) x (N/32) grid. Deliberately plain: it measures a device the
// same way on every architecture, not the best SGEMM the device can do (see gpu/README.md).
//
// Not compiled by the build: its PTX is embedded in probe_kernel_ptx.hpp, regenerated with
// scripts/gen-probe-ptx.sh.

constexpr int tile = 32;

extern "C" __global__ void celer_probe_sgemm(const float* a, const float* b, float* c, int n) {
  __shared__ float a_tile[tile][tile];
  __shared__ float b_tile[tile][tile];
  const int row = blockIdx.y * tile + threadIdx.y;
  const int col = blockIdx.x * tile + threadIdx.x;
  float sum = 0.0f;
  for (int k0 = 0; k0 < n; k0 += tile) {
    a_tile[threadIdx.y][threadIdx.x] = a[row * n + k0 + threadIdx.x];
    b_tile[threadIdx.y][threadIdx.x] = b[(k0 + threadIdx.y) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < tile; ++k) sum += a_tile[threadIdx.y][k] * b_tile[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = sum;
}
