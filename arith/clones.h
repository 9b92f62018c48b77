// TPU_VECTOR_CLONES: a kernel compiled for AVX-512 (x86-64-v4), AVX2 and the baseline, the
// CPU's widest chosen when the program starts (target_clones), so that its row loops run
// 16 lanes wide where the CPU can (arith/CMakeLists.txt has GCC prefer 512-bit vectors in
// the files that use it); elsewhere the baseline alone. Every clone computes the same values:
// the loops are lane by lane, without fused multiply-adds (-ffp-contract=off).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define TPU_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TPU_VECTOR_CLONES
#endif
