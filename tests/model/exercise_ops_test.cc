// The exercise ops behind Backend::exercise_ops(): the backends that have
// them return themselves, a plain Backend has none, and the CPU backend's
// attention_rope_forward is the composition it always was -- q and k copied
// and rotated, v copied, then attention over the copies -- bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/mat.h"
#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "cpu/rounding_backend.h"
#include "model/backend.h"
#include "prof/access_trace.h"

namespace tinyllama {
namespace {

struct Buffer {
  Buffer(std::int64_t rows, std::int64_t cols, Rng* rng = nullptr)
      : values(static_cast<std::size_t>(rows * cols)), rows_(rows), cols_(cols) {
    if (rng == nullptr) return;
    for (double& x : values) x = rng->uniform() * 2 - 1;
  }
  Mat mat() { return Mat(values.data(), DType::F64, rows_, cols_); }
  std::vector<double> values;
  std::int64_t rows_, cols_;
};

TEST(ExerciseOps, TheBackendsThatHaveThemReturnThemselves) {
  CpuBackend cpu;
  EXPECT_EQ(cpu.exercise_ops(), static_cast<ExerciseOps*>(&cpu));
  prof::AccessTraceBackend trace(DeviceCaps::cpu());
  EXPECT_EQ(trace.exercise_ops(), static_cast<ExerciseOps*>(&trace));
  RoundingBackend rounding(DType::BF16);
  EXPECT_EQ(rounding.exercise_ops(), nullptr);
}

TEST(ExerciseOps, TheCpuAttentionRopeForwardIsTheComposition) {
  const AttentionShape s{2, 5, 4, 2, 8};
  const std::int64_t t = static_cast<std::int64_t>(s.batch) * s.seq;
  const std::int64_t qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  const double theta = 10000.0;
  Rng rng(3);
  Buffer q(t, qd, &rng), k(t, kvd, &rng), v(t, kvd, &rng);
  Buffer out(t, qd), lse(static_cast<std::int64_t>(s.batch) * s.heads, s.seq);
  Buffer q_rot(t, qd), k_rot(t, kvd), v_copy(t, kvd);
  CpuBackend cpu;
  cpu.exercise_ops()->attention_rope_forward(AttentionImpl::Flash, out.mat(), lse.mat(), Mat(),
                                             q.mat(), k.mat(), v.mat(), q_rot.mat(), k_rot.mat(),
                                             v_copy.mat(), s, theta);

  Buffer q2 = q, k2 = k, v2 = v;
  Buffer out2(t, qd), lse2(static_cast<std::int64_t>(s.batch) * s.heads, s.seq);
  cpu.rope_forward(q2.mat(), s.seq, s.head_dim, theta);
  cpu.rope_forward(k2.mat(), s.seq, s.head_dim, theta);
  cpu.attention_forward(AttentionImpl::Flash, out2.mat(), lse2.mat(), Mat(), q2.mat(), k2.mat(),
                        v2.mat(), s);
  EXPECT_EQ(q_rot.values, q2.values);
  EXPECT_EQ(k_rot.values, k2.values);
  EXPECT_EQ(v_copy.values, v2.values);
  EXPECT_EQ(out.values, out2.values);
  EXPECT_EQ(lse.values, lse2.values);
}

}  // namespace
}  // namespace tinyllama
