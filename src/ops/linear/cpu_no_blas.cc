// A build without OpenBLAS (TINYLLAMA_BLAS=OFF, or libopenblas-dev not
// found): the fast CPU backend keeps the reference loops for its GEMMs.
#include <stdexcept>

#include "ops/linear/cpu_blas.h"

namespace tinyllama::cpu {

bool blas_available() {
  return false;
}

std::string blas_description() {
  return "no BLAS in this build: reference loops";
}

void use_best_blas_kernels(char**) {}

void blas_gemm(Mat, Mat, bool, Mat, bool, float, float) {
  throw std::logic_error("blas_gemm: this build has no BLAS (check blas_available())");
}

void blas_gemm_serial(Mat, Mat, bool, Mat, bool, float, float) {
  throw std::logic_error("blas_gemm_serial: this build has no BLAS (check blas_available())");
}

}  // namespace tinyllama::cpu
