// The fused AdamW sweep (Backend::adamw_fused, the fused_optimizer toggle)
// against (a) the CUDA per-tensor path, adamw on slices then convert for the
// compute copy, bit for bit, and (b) the CPU reference within fp32
// tolerance. An odd element count and views that start off a 16-byte
// boundary exercise the kernel's scalar head and tail around the float4
// body; a view whose blocks disagree in alignment exercises the all-scalar
// fallback. Elements just outside the view are guarded, and a set skip
// flag must leave every byte as it was.
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "model/step_scalars.h"
#include "ops/optimizer/cpu_adamw.h"

namespace tinyllama::gpu_test {
namespace {

constexpr std::int64_t kN = 1001;   // odd: a tail after the last float4
constexpr std::int64_t kGuard = 8;  // spare elements around every view
constexpr float kGuardValue = 12345.0f;

// Offsets (in elements) of each block's view into its buffer.
struct Offsets {
  const char* label;
  std::int64_t p, g, m, v, copy;
};

struct Case {
  DType copy;  // F64 stands for "no compute copy" (fp32 training)
  Offsets at;
};

std::string case_name(const Case& c) {
  return (c.copy == DType::F64 ? std::string("NoCopy") : "Copy" + dtype_label(c.copy)) + "_" +
         c.at.label;
}

// A device buffer of kN + 2 * kGuard elements of one dtype, and a view of kN at an offset.
class Buffers {
 public:
  Buffers(cuda::CudaBackend& gpu, DType dtype, std::int64_t offset)
      : gpu_(gpu), dtype_(dtype), offset_(offset) {
    bytes_ = static_cast<std::size_t>(kN + 2 * kGuard) * dtype_size(dtype);
    base_ = gpu_.allocate(bytes_);
  }
  ~Buffers() {
    try {
      gpu_.release(base_);
    } catch (...) {
    }
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  Mat view() const {
    return Mat(static_cast<char*>(base_) + offset_ * static_cast<std::int64_t>(dtype_size(dtype_)),
               dtype_, 1, kN);
  }
  // All bytes, guards included.
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> raw(bytes_);
    gpu_.download(raw.data(), base_, bytes_);
    return raw;
  }
  void set_bytes(const std::vector<unsigned char>& raw) { gpu_.upload(base_, raw.data(), bytes_); }
  // fp32 only: the view's values, and the whole buffer set to guards + values.
  std::vector<float> values() const {
    const std::vector<unsigned char> raw = bytes();
    std::vector<float> out(static_cast<std::size_t>(kN));
    std::memcpy(out.data(), raw.data() + offset_ * 4, out.size() * 4);
    return out;
  }
  void set_values(const std::vector<float>& vals) {
    std::vector<float> all(static_cast<std::size_t>(kN + 2 * kGuard), kGuardValue);
    std::copy(vals.begin(), vals.end(), all.begin() + offset_);
    gpu_.upload(base_, all.data(), all.size() * 4);
  }
  bool guards_intact() const {
    const std::vector<unsigned char> raw = bytes();
    const std::size_t es = dtype_size(dtype_);
    std::vector<unsigned char> guard(es);
    encode_element(kGuardValue, dtype_, guard.data());
    for (std::int64_t i = 0; i < kN + 2 * kGuard; ++i) {
      if (i >= offset_ && i < offset_ + kN) continue;
      if (std::memcmp(raw.data() + static_cast<std::size_t>(i) * es, guard.data(), es) != 0) {
        return false;
      }
    }
    return true;
  }
  // Guards around a view whose values are the given device bytes.
  void set_guards() {
    std::vector<unsigned char> raw = bytes();
    const std::size_t es = dtype_size(dtype_);
    for (std::int64_t i = 0; i < kN + 2 * kGuard; ++i) {
      if (i >= offset_ && i < offset_ + kN) continue;
      encode_element(kGuardValue, dtype_, raw.data() + static_cast<std::size_t>(i) * es);
    }
    set_bytes(raw);
  }

 private:
  cuda::CudaBackend& gpu_;
  DType dtype_;
  std::int64_t offset_;
  std::size_t bytes_ = 0;
  void* base_ = nullptr;
};

// One optimizer state on the device: param, grad, m, v and (maybe) the copy.
struct DeviceState {
  DeviceState(cuda::CudaBackend& gpu, const Case& c)
      : p(gpu, DType::F32, c.at.p),
        g(gpu, DType::F32, c.at.g),
        m(gpu, DType::F32, c.at.m),
        v(gpu, DType::F32, c.at.v),
        copy(gpu, c.copy == DType::F64 ? DType::F32 : c.copy, c.at.copy),
        with_copy(c.copy != DType::F64) {}
  Buffers p, g, m, v, copy;
  bool with_copy;
  Mat copy_view() const { return with_copy ? copy.view() : Mat(); }
};

class GpuAdamWFused : public GpuParamTest<Case> {};

TEST_P(GpuAdamWFused, BitIdenticalToPerTensorThenConvertAndCloseToCpu) {
  const Case c = GetParam();
  Harness h(DType::F32);
  cuda::CudaBackend& gpu = h.gpu();
  DeviceState fused(gpu, c), split(gpu, c);

  std::vector<float> p0(static_cast<std::size_t>(kN));
  for (float& x : p0) x = static_cast<float>(0.02 * h.rng().normal());
  const std::vector<float> zeros(p0.size(), 0.f);
  for (DeviceState* s : {&fused, &split}) {
    s->p.set_values(p0);
    s->m.set_values(zeros);
    s->v.set_values(zeros);
    s->g.set_values(zeros);
    if (s->with_copy) {
      gpu.convert(s->copy.view(), s->p.view());
      s->copy.set_guards();
    }
  }

  // The per-tensor path runs on three slices of the block, like the model's
  // per-parameter calls, then one convert over the whole copy.
  const std::int64_t cuts[] = {0, 400, 401, kN};
  auto slice = [&](const Buffers& b, int k) {
    return Mat(static_cast<char*>(b.view().data) + cuts[k] * 4, DType::F32, 1,
               cuts[k + 1] - cuts[k]);
  };

  void* scalars_dev = gpu.allocate(sizeof(StepScalars));
  AdamWHyper hp;
  hp.lr = 1e-2f;  // far above fp32 rounding of p
  hp.weight_decay = 0.1f;
  for (int step = 1; step <= 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    hp.step = step;
    hp.scalars = nullptr;
    if (step == 3) hp.grad_scale = 256.0f;  // loss-scaled gradients divided out
    if (step == 4) {
      // The model's way: lr, step and grad_scale read from staged device scalars.
      const StepScalars sc = make_step_scalars(hp, hp.grad_scale, 1);
      gpu.upload(scalars_dev, &sc, sizeof sc);
      hp.scalars = static_cast<const StepScalars*>(scalars_dev);
    }
    std::vector<float> g(static_cast<std::size_t>(kN));
    for (float& x : g) x = static_cast<float>(hp.grad_scale * h.rng().normal());
    fused.g.set_values(g);
    split.g.set_values(g);

    // CPU reference from the same starting state.
    std::vector<float> cp = fused.p.values(), cm = fused.m.values(), cv = fused.v.values();
    const std::vector<float> p_before = cp;
    AdamWHyper cpu_hp = hp;
    cpu_hp.scalars = nullptr;
    cpu::adamw(Mat(cp.data(), DType::F32, 1, kN), Mat(g.data(), DType::F32, 1, kN),
               Mat(cm.data(), DType::F32, 1, kN), Mat(cv.data(), DType::F32, 1, kN), cpu_hp);

    gpu.adamw_fused(fused.p.view(), fused.g.view(), fused.m.view(), fused.v.view(),
                    fused.copy_view(), hp);
    for (int k = 0; k < 3; ++k) {
      gpu.adamw(slice(split.p, k), slice(split.g, k), slice(split.m, k), slice(split.v, k), hp);
    }
    if (split.with_copy) gpu.convert(split.copy.view(), split.p.view());
    gpu.synchronize();

    EXPECT_EQ(fused.p.bytes(), split.p.bytes()) << "parameters differ from the per-tensor path";
    EXPECT_EQ(fused.m.bytes(), split.m.bytes()) << "m differs from the per-tensor path";
    EXPECT_EQ(fused.v.bytes(), split.v.bytes()) << "v differs from the per-tensor path";
    if (c.copy != DType::F64) {
      EXPECT_EQ(fused.copy.bytes(), split.copy.bytes()) << "copy differs from adamw + convert";
      EXPECT_TRUE(fused.copy.guards_intact()) << "wrote outside the compute copy's view";
    }
    for (const Buffers* b : {&fused.p, &fused.m, &fused.v}) {
      EXPECT_TRUE(b->guards_intact()) << "wrote outside a view";
    }

    const std::vector<float> dp = fused.p.values(), dm = fused.m.values(), dv = fused.v.values();
    double upd = 0, err_p = 0, max_m = 0, err_m = 0, max_v = 0, err_v = 0;
    for (std::size_t i = 0; i < dp.size(); ++i) {
      upd = std::max(upd, std::abs(static_cast<double>(cp[i]) - p_before[i]));
      err_p = std::max(err_p, std::abs(static_cast<double>(dp[i]) - cp[i]));
      max_m = std::max(max_m, std::abs(static_cast<double>(cm[i])));
      err_m = std::max(err_m, std::abs(static_cast<double>(dm[i]) - cm[i]));
      max_v = std::max(max_v, std::abs(static_cast<double>(cv[i])));
      err_v = std::max(err_v, std::abs(static_cast<double>(dv[i]) - cv[i]));
    }
    ASSERT_GT(upd, 0.0);
    EXPECT_LE(err_p / upd, 1e-4) << "parameters vs the CPU reference";
    EXPECT_LE(err_m / max_m, 1e-5) << "m vs the CPU reference";
    EXPECT_LE(err_v / max_v, 1e-5) << "v vs the CPU reference";
  }

  // A set skip flag (device memory): nothing changes, guards and copy included.
  const Tokens flag = h.tokens({1});
  hp.skip_flag = flag.gpu;
  const auto p_bytes = fused.p.bytes(), m_bytes = fused.m.bytes(), v_bytes = fused.v.bytes(),
             c_bytes = fused.copy.bytes();
  gpu.adamw_fused(fused.p.view(), fused.g.view(), fused.m.view(), fused.v.view(), fused.copy_view(),
                  hp);
  gpu.synchronize();
  EXPECT_EQ(fused.p.bytes(), p_bytes) << "a skipped step changed the parameters";
  EXPECT_EQ(fused.m.bytes(), m_bytes) << "a skipped step changed m";
  EXPECT_EQ(fused.v.bytes(), v_bytes) << "a skipped step changed v";
  EXPECT_EQ(fused.copy.bytes(), c_bytes) << "a skipped step changed the compute copy";
  gpu.release(scalars_dev);
}

std::vector<Case> cases() {
  const Offsets layouts[] = {
      {"Aligned", 0, 0, 0, 0, 0},
      {"Offset1", 1, 1, 1, 1, 1},     // head of 3 scalars before the float4 body
      {"Offset3", 3, 3, 3, 3, 3},     // head of 1
      {"Mismatched", 1, 2, 1, 1, 1},  // no common alignment: all scalar
  };
  std::vector<Case> out;
  for (const DType t : {DType::F64, DType::F32, DType::BF16, DType::F16}) {
    for (const Offsets& o : layouts) out.push_back({t, o});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, GpuAdamWFused, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return case_name(info.param); });

// Zero gradients and zero state (the layout's padding) stay exactly zero.
TEST_F(GpuTest, AdamWFusedKeepsZeroPaddingZero) {
  Harness h(DType::BF16);
  const std::int64_t n = 4 * 64 + 5;
  const Twin p = h.from_values(1, n, DType::F32, std::vector<double>(n, 0.0));
  const Twin g = h.from_values(1, n, DType::F32, std::vector<double>(n, 0.0));
  const Twin m = h.from_values(1, n, DType::F32, std::vector<double>(n, 0.0));
  const Twin v = h.from_values(1, n, DType::F32, std::vector<double>(n, 0.0));
  const Twin copy = h.output(1, n, DType::BF16);
  AdamWHyper hp;
  for (int step = 1; step <= 3; ++step) {
    hp.step = step;
    h.gpu().adamw_fused(p.gpu, g.gpu, m.gpu, v.gpu, copy.gpu, hp);
  }
  for (const Twin* t : {&p, &m, &v, &copy}) {
    for (const double x : h.device_values(t->gpu)) ASSERT_EQ(x, 0.0);
  }
}

}  // namespace
}  // namespace tinyllama::gpu_test
