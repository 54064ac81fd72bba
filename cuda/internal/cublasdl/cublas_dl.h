// cublas_dl.h declares the cuBLAS entry points package cublasdl resolves with dlsym, as
// function pointer types, so that nothing links against libcublas and no cuBLAS header is
// needed to build. The types follow cublas_api.h of CUDA 11 to 13 (the _v2 names are the
// exported symbols behind cublas_v2.h's macros); testdata/abi_check.c checks them against
// the real header (.ci/gpu-checks compiles it).
#ifndef FEDAUDIT_CUBLAS_DL_H
#define FEDAUDIT_CUBLAS_DL_H

struct cublasContext;
struct CUstream_st;
typedef struct cublasContext* fa_cublas_handle;
// cuBLAS's enums (status, operation, math mode, library property) have no negative values,
// so GCC and Clang give them the type unsigned int.
typedef unsigned int fa_cublas_enum;

typedef fa_cublas_enum (*fa_cublasCreate_v2)(fa_cublas_handle*);
typedef fa_cublas_enum (*fa_cublasDestroy_v2)(fa_cublas_handle);
typedef fa_cublas_enum (*fa_cublasGetProperty)(fa_cublas_enum, int*);
typedef fa_cublas_enum (*fa_cublasSetStream_v2)(fa_cublas_handle, struct CUstream_st*);
typedef fa_cublas_enum (*fa_cublasSetMathMode)(fa_cublas_handle, fa_cublas_enum);
typedef fa_cublas_enum (*fa_cublasSgemm_v2)(fa_cublas_handle, fa_cublas_enum, fa_cublas_enum,
                                            int, int, int, const float*, const float*, int,
                                            const float*, int, const float*, float*, int);
typedef fa_cublas_enum (*fa_cublasSgemmStridedBatched)(fa_cublas_handle, fa_cublas_enum,
                                                       fa_cublas_enum, int, int, int,
                                                       const float*, const float*, int,
                                                       long long, const float*, int, long long,
                                                       const float*, float*, int, long long,
                                                       int);

// cublasGemmStridedBatchedEx with cudaDataType and cublasComputeType_t (both enums) as
// fa_cublas_enum: the products of float32 operands at a compute type such as
// CUBLAS_COMPUTE_32F_FAST_16BF.
typedef fa_cublas_enum (*fa_cublasGemmStridedBatchedEx)(fa_cublas_handle, fa_cublas_enum,
                                                        fa_cublas_enum, int, int, int,
                                                        const void*, const void*, fa_cublas_enum,
                                                        int, long long, const void*,
                                                        fa_cublas_enum, int, long long,
                                                        const void*, void*, fa_cublas_enum, int,
                                                        long long, int, fa_cublas_enum, int);

#endif
