// Compiled (not linked) by .ci/gpu-checks against the toolkit's cublas_v2.h: every function
// pointer type of cublas_dl.h must be the type of the real entry point, or the build fails.
#include <cublas_v2.h>

#include "../cublas_dl.h"

#define SAME(name) \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&name), fa_##name), #name " differs from cublas_api.h")

_Static_assert(sizeof(cublasStatus_t) == sizeof(fa_cublas_enum), "cublasStatus_t");
_Static_assert(__builtin_types_compatible_p(cublasHandle_t, fa_cublas_handle), "cublasHandle_t");
SAME(cublasCreate_v2);
SAME(cublasDestroy_v2);
SAME(cublasGetProperty);
SAME(cublasSetStream_v2);
SAME(cublasSetMathMode);
SAME(cublasSgemm_v2);
SAME(cublasSgemmStridedBatched);
SAME(cublasGemmStridedBatchedEx);
// The enum values cublasdl passes (Handle.SgemmFast): float32 data, the default algorithm, and
// the compute types.
_Static_assert(CUDA_R_32F == 0, "CUDA_R_32F");
_Static_assert(CUBLAS_GEMM_DEFAULT == -1, "CUBLAS_GEMM_DEFAULT");
_Static_assert(CUBLAS_COMPUTE_32F_FAST_16BF == 75, "CUBLAS_COMPUTE_32F_FAST_16BF");
_Static_assert(CUBLAS_TF32_TENSOR_OP_MATH == 3, "CUBLAS_TF32_TENSOR_OP_MATH");
