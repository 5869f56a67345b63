// The engine's CUDA entry points (cuda/cuda_entry.h) and the backend's
// memory and timing plumbing. The entry points must never crash: with no
// device they say so (that check runs only where there is no device), with
// one they describe it (skipped where there is none).
#include <cstring>

#include "gpu_test_util.h"

namespace tinyllama::gpu_test {
namespace {

TEST(CudaEntryNoDevice, QueriesAreGracefulWithoutADevice) {
  if (cuda_device_available())
    GTEST_SKIP() << "a CUDA device is present: the no-device path is not reachable";
  EXPECT_FALSE(cuda_device_available());  // asking twice leaves no sticky error behind
  EXPECT_NE(cuda_device_description().find("none"), std::string::npos) << cuda_device_description();
  std::size_t free_bytes = 123, total_bytes = 456;
  EXPECT_FALSE(cuda_memory_info(&free_bytes, &total_bytes));
  EXPECT_NE(cuda_build_versions().find("CUDA"), std::string::npos) << cuda_build_versions();
  EXPECT_THROW(make_cuda_backend(Precision::fp32()), RuntimeFailure);
}

TEST_F(GpuTest, EntryPointsDescribeTheDevice) {
  EXPECT_TRUE(cuda_device_available());
  const std::string desc = cuda_device_description();
  EXPECT_NE(desc.find("sm_"), std::string::npos) << desc;
  std::size_t free_bytes = 0, total_bytes = 0;
  ASSERT_TRUE(cuda_memory_info(&free_bytes, &total_bytes));
  EXPECT_GT(total_bytes, 0u);
  EXPECT_LE(free_bytes, total_bytes);
  const std::string versions = cuda_build_versions();
  EXPECT_NE(versions.find("CUDA"), std::string::npos) << versions;
  EXPECT_EQ(versions.find("driver none"), std::string::npos) << versions;

  const std::unique_ptr<Backend> backend = make_cuda_backend(Precision::amp(DType::BF16));
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name(), "cuda");
  EXPECT_EQ(backend->device_description(), desc);
}

TEST_F(GpuTest, Float64IsRefused) {
  EXPECT_THROW(make_cuda_backend(Precision::fp64()), RuntimeFailure);
}

TEST_F(GpuTest, MemoryRoundTripAndFillZero) {
  const std::unique_ptr<Backend> b = make_cuda_backend(Precision::fp32());
  std::vector<std::uint8_t> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::uint8_t>(i * 7 + 1);
  void* dev = b->allocate(host.size());
  b->upload(dev, host.data(), host.size());
  std::vector<std::uint8_t> back(host.size(), 0);
  b->download(back.data(), dev, back.size());
  EXPECT_EQ(back, host);
  b->fill_zero(static_cast<char*>(dev) + 10, 100);
  b->download(back.data(), dev, back.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    ASSERT_EQ(back[i], (i >= 10 && i < 110) ? 0 : host[i]) << "byte " << i;
  }
  b->release(dev);
  EXPECT_GT(b->device_peak_used_bytes(), 0);
}

TEST_F(GpuTest, PrepareAllocatesThePlannedWorkspacesAndTimersMeasure) {
  const std::unique_ptr<Backend> b = make_cuda_backend(Precision::fp32());
  ModelConfig cfg;
  const BatchShape shape{8, 128};
  // The memory check and the reported peak count the plan's workspaces: the
  // backend must allocate exactly those, for every plan a level can take.
  for (const PlanVariant& v : level_variants()) {
    const StepPlan plan = test_plan(v.ops, Precision::fp32(), *b, cfg, shape);
    EXPECT_GT(plan.workspace_bytes(), 0) << v.name;
    b->prepare(cfg, shape, plan);
    EXPECT_EQ(b->workspace_bytes(), plan.workspace_bytes()) << v.name;
    // Preparing again replaces the workspaces instead of leaking them.
    b->prepare(cfg, shape, plan);
    EXPECT_EQ(b->workspace_bytes(), plan.workspace_bytes()) << v.name;
  }

  const std::unique_ptr<EventTimer> timer = b->make_timer(2);
  timer->record(0);
  void* dev = b->allocate(1 << 20);
  b->fill_zero(dev, 1 << 20);
  timer->record(1);
  EXPECT_GE(timer->elapsed_ms(0, 1), 0.0);
  b->release(dev);
}

// Bad arguments are a one-line RuntimeFailure, not a crash or a silent no-op.
TEST_F(GpuTest, ShapeMismatchesThrow) {
  Harness h(DType::F32);
  const Twin a = h.input(4, 5, DType::F32);
  const Twin b = h.input(6, 7, DType::F32);
  const Twin c = h.output(4, 7, DType::F32);
  EXPECT_THROW(h.gpu().gemm(c.gpu, a.gpu, false, b.gpu, false, 1.0f, 0.0f), RuntimeFailure);
  EXPECT_THROW(h.gpu().add(c.gpu, a.gpu, b.gpu), RuntimeFailure);
  const Twin bf = h.input(4, 5, DType::BF16);
  EXPECT_THROW(h.gpu().add(a.gpu, a.gpu, bf.gpu), RuntimeFailure);
}

}  // namespace
}  // namespace tinyllama::gpu_test
