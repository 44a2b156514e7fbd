// MLA_HD marks functions callable from host and device code; plain inline in CPU-only builds.
#pragma once

#if defined(__CUDACC__)
#define MLA_HD __host__ __device__ __forceinline__
#else
#define MLA_HD inline
#endif
