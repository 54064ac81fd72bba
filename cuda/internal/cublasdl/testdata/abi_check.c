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
