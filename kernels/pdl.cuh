// Programmatic dependent launch (sm_90+), for the kernels that runtime.Kernel(..., pdl=True) launches as dependents of the
// launch before them on the stream (moe_w4a16.cu's _pdl kernels, verify_attn.cu's verify_attn_combine_pdl). Such a grid
// may start while the grid before it drains; it must wait (pdl_wait) before it reads that grid's output.
#pragma once
#include <stdint.h>
#include <cuda_runtime.h>   // uint4

// wait for the grid this one depends on (all of it complete, its memory visible), and let this grid's dependent launch.
// Both are no-ops under a plain launch and below sm_90.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// a pointer the compiler cannot see through: loads from it depend on this point of the program (after pdl_wait). Under PDL
// the grid before may still be writing its output while this grid runs its prologue, so that output must be read with
// coherent loads (ld.global.cg), never through the read-only path (ld.global.nc / __ldg), whose data must not change during
// the kernel's life
template <class T> __device__ __forceinline__ T *after_here(T *p) {
    uint64_t u = reinterpret_cast<uint64_t>(p);
    asm volatile("mov.b64 %0, %0;\n" : "+l"(u)::"memory");
    return reinterpret_cast<T *>(u);
}

// coherent loads at L2 (not the read-only path), for data the grid before may still be writing while this one runs
// (moe_w4a16_common.cuh's load_chunk_x, the MoE and verify combines under PDL)
__device__ __forceinline__ uint4 ldcg(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ float ldcg(const float *p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
    return v;
}
