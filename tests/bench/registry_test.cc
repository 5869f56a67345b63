// The kernel bench's registry against the cost model: every op the cost
// model knows is benched (or says where its kernel is measured), every
// entry's cost resolves at every precision, and --ops selects what it says.
#include "bench/op_registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/shapes.h"
#include "core/errors.h"

namespace tinyllama::bench {
namespace {

std::vector<Precision> every_precision() {
  return {Precision::fp32(), Precision::amp(DType::BF16), Precision::amp(DType::F16)};
}

// Every implementation choice the registry uses, all of them off and all on.
std::vector<ImplChoice> every_impl() {
  auto with = [](bool on, AttentionImpl attention) {
    ImplChoice c;
    c.fused_qkv = c.fused_ffn = c.fused_optimizer = c.fused_norm = c.chunked_loss = on;
    c.attention = attention;
    return c;
  };
  std::vector<ImplChoice> out{ImplChoice{}, with(false, AttentionImpl::Materialized),
                              with(true, AttentionImpl::Flash)};
  for (const OpVariant& v : registry()) out.push_back(v.impl);
  return out;
}

std::string kind_key_of(const OpVariant& v, const BenchShape& s, Precision p) {
  return cost_of(s.cfg, s.batch, v.impl, p, v.cost_path).kind_key();
}

TEST(BenchRegistry, EveryCostModelOpIsBenchedOrSaysWhereItsKernelIs) {
  std::set<std::string> covered;
  const BenchShape& workshop = preset_shapes().front();
  for (const Precision p : every_precision()) {
    for (const OpVariant& v : registry()) covered.insert(kind_key_of(v, workshop, p));
  }
  std::set<std::string> elsewhere;
  for (const auto& [key, where] : ops_measured_elsewhere()) {
    EXPECT_FALSE(where.empty()) << key;
    elsewhere.insert(key);
  }
  std::set<std::string> in_cost_model;
  for (const ImplChoice& impl : every_impl()) {
    for (const Precision p : every_precision()) {
      for (const prof::OpCost& op : all_costs(workshop.cfg, workshop.batch, impl, p)) {
        in_cost_model.insert(op.kind_key());
        EXPECT_TRUE(covered.count(op.kind_key()) == 1 || elsewhere.count(op.kind_key()) == 1)
            << op.path << ": the cost model has it, the kernel bench neither runs it nor lists it "
            << "in ops_measured_elsewhere()";
      }
    }
  }
  // And no stale names: what the list names, the cost model has.
  for (const std::string& key : elsewhere) {
    EXPECT_EQ(in_cost_model.count(key), 1u) << key << " is not an op of the cost model";
  }
}

TEST(BenchRegistry, EveryEntryHasACostAtEveryPresetAndPrecision) {
  for (const BenchShape& s : preset_shapes()) {
    for (const Precision p : every_precision()) {
      for (const OpVariant& v : registry()) {
        SCOPED_TRACE(s.name + " " + precision_label(p) + " " + v.label());
        const prof::OpCost c = cost_of(s.cfg, s.batch, v.impl, p, v.cost_path);
        EXPECT_GT(c.bytes, 0);
        // The lookup gathers rows and moves bytes, nothing else.
        if (v.family() != "embedding") {
          EXPECT_GT(c.flops, 0);
        }
      }
    }
  }
}

TEST(BenchRegistry, VariantsDifferInTheirCost) {
  const BenchShape& s = preset_shapes()[1];  // B32 S1024: the probabilities are large
  const Precision bf16 = Precision::amp(DType::BF16);
  ImplChoice materialised;
  materialised.attention = AttentionImpl::Materialized;
  const auto flash = cost_of(s.cfg, s.batch, ImplChoice{}, bf16, "forward/layer0/attention");
  const auto full = cost_of(s.cfg, s.batch, materialised, bf16, "forward/layer0/attention");
  EXPECT_EQ(flash.flops, full.flops);  // the same model work
  EXPECT_GT(full.bytes, flash.bytes);  // plus the saved S x S probabilities
}

TEST(BenchRegistry, LayerAdamWDerivedShareMatchesTheCostModelsOwnFigure) {
  // Under bf16 the cost model counts layer 0's fused sweep itself; under
  // fp16 (same element sizes) the bench derives it from the whole-model
  // sweep. The two must agree within the slots' padding.
  const BenchShape& s = preset_shapes()[2];
  const auto exact =
      cost_of(s.cfg, s.batch, ImplChoice{}, Precision::amp(DType::BF16), kLayerAdamwPath);
  const auto derived =
      cost_of(s.cfg, s.batch, ImplChoice{}, Precision::amp(DType::F16), kLayerAdamwPath);
  EXPECT_NEAR(static_cast<double>(derived.bytes), static_cast<double>(exact.bytes),
              1e-3 * static_cast<double>(exact.bytes));
  EXPECT_NEAR(static_cast<double>(derived.flops), static_cast<double>(exact.flops),
              1e-6 * static_cast<double>(exact.flops));
}

TEST(BenchRegistry, LabelsAreUniqueAndVariantsOfAnOpAreAdjacent) {
  std::set<std::string> labels;
  std::set<std::string> finished;  // ops whose rows have ended
  std::string previous;
  for (const OpVariant& v : registry()) {
    EXPECT_TRUE(labels.insert(v.label()).second) << "duplicate " << v.label();
    if (v.op != previous) {
      EXPECT_EQ(finished.count(v.op), 0u) << v.op << "'s variants are not on adjacent rows";
      if (!previous.empty()) finished.insert(previous);
      previous = v.op;
    }
    EXPECT_TRUE(v.make) << v.label();
  }
}

std::vector<std::string> labels_of(const std::vector<const OpVariant*>& ops) {
  std::vector<std::string> out;
  for (const OpVariant* v : ops) out.push_back(v->label());
  return out;
}

TEST(BenchSelectOps, FamilyPassVariantAndGemm) {
  EXPECT_EQ(labels_of(select_ops("attention")),
            (std::vector<std::string>{
                "attention.fwd materialized",   "attention.fwd flash",
                "attention.fwd flash+rope",     "attention.fwd flash-mma",
                "attention.fwd flash-wg1x64",   "attention.fwd flash-wg1x128",
                "attention.fwd flash-wg2x64",   "attention.fwd flash-wg2x128",
                "attention.fwd flash-pair2x64", "attention.fwd flash-pair2x128",
                "attention.fwd flash-ov1x64",   "attention.fwd flash-ov2x64",
                "attention.fwd flash-ov2x128",  "attention.fwd flash-ws64",
                "attention.fwd flash-ws128",    "attention.fwd flash-wspp64",
                "attention.fwd flash-wspp128",  "attention.fwd cudnn",
                "attention.bwd materialized",   "attention.bwd flash",
                "attention.bwd flash-mma",      "attention.bwd flash-wgmma",
                "attention.bwd flash-ws",       "attention.bwd flash-one-launch",
                "attention.bwd flash-fused",    "attention.bwd flash-delta-separate",
                "attention.bwd cudnn",          "attention.bwd flash+rope",
            }));
  EXPECT_EQ(labels_of(select_ops("attention.bwd:flash, rmsnorm.fwd")),
            (std::vector<std::string>{"rmsnorm.fwd", "attention.bwd flash"}));  // registry order
  EXPECT_EQ(labels_of(select_ops("adamw,adamw:fused")),
            (std::vector<std::string>{"adamw per-tensor", "adamw fused"}));
  for (const OpVariant* v : select_ops("gemm")) {
    EXPECT_NE(v->family().find("_gemm"), std::string::npos) << v->label();
  }
  EXPECT_EQ(select_ops("gemm").size(), 21u);  // 5 linears x 3 passes, 2 of them split too
  EXPECT_EQ(select_ops("qkv_gemm.wgrad:split").size(), 1u);
}

TEST(BenchSelectOps, UnknownNamesAreUsageErrorsNamingTheFlag) {
  for (const char* bad : {"attn", "attention.fwd:fast", "rmsnorm.fwd:fused", ",", "gemm,softmax"}) {
    try {
      select_ops(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--ops ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace tinyllama::bench
