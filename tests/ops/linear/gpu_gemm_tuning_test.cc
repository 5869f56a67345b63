// The GEMM choices a checkpoint (or rank 0, to the other ranks of a
// data-parallel run) carries as text: written for the exporting GPU's keys
// only and read back onto the importing GPU, so that a rank on device 1
// reruns what rank 0 timed on device 0 (cuda_gemm_tuned.h).
#include <sstream>
#include <string>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "ops/linear/cuda_gemm.h"

namespace tinyllama::gpu_test {
namespace {

// The text with every key's device field (a line's 22nd number) set to `device`.
std::string with_device(const std::string& text, int device) {
  std::istringstream in(text);
  std::string out, line;
  int header = 3;  // format, cuBLASLt version, GPU name
  while (std::getline(in, line)) {
    if (header-- > 0) {
      out += line + "\n";
      continue;
    }
    std::istringstream fields(line);
    std::vector<std::string> parts;
    for (std::string f; fields >> f;) parts.push_back(f);
    EXPECT_EQ(parts.size(), 23u) << line;  // 22 key fields and the algorithm's bytes
    parts[21] = std::to_string(device);
    for (std::size_t i = 0; i < parts.size(); ++i)
      out += parts[i] + (i + 1 < parts.size() ? " " : "\n");
  }
  return out;
}

class GpuGemmTuning : public GpuTest {};

TEST_F(GpuGemmTuning, ChoicesMoveToTheImportingDevice) {
  cuda::GemmRunner::forget_tuned_choices();
  Harness h(DType::BF16);
  h.prepare(ModelConfig{}, BatchShape{2, 16}, "v1");
  const Twin a = h.input(96, 160, DType::BF16, 1.0, 0);
  const Twin b = h.input(160, 72, DType::BF16, 1.0, 0);
  const Twin c = h.output(96, 72, DType::BF16, 0);
  h.gpu().gemm(c.gpu, a.gpu, false, b.gpu, false, 1.0f, 0.0f);  // eager: timed
  h.gpu().synchronize();
  const std::string mine = cuda::GemmRunner::export_tuned_choices();
  ASSERT_NE(mine.find('\n', mine.find("gpu ")), mine.size() - 1) << "nothing was timed:\n" << mine;

  // Another device's choices of the same problems become this device's.
  cuda::GemmRunner::forget_tuned_choices();
  ASSERT_EQ(cuda::GemmRunner::import_tuned_choices(with_device(mine, 7)), "");
  EXPECT_EQ(cuda::GemmRunner::export_tuned_choices(), mine);
}

}  // namespace
}  // namespace tinyllama::gpu_test
