// smoke.cu: the smallest kernel, used by nbs/00a_runtime to check compile + launch on torch tensors
// and by CI to check that kernels ship inside the wheel. y += a * x.
extern "C" __global__ void axpy(float *__restrict__ y, const float *__restrict__ x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
