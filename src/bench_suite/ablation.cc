#include "bench_suite/ablation.h"

namespace tinyllama::suite {
namespace {

const PointResult* base_of(const std::vector<PointResult>& points, const PointResult& r) {
  for (const PointResult& o : points) {
    if (o.point.variant.name.empty() && o.model == r.model && o.point.level == r.point.level &&
        o.point.precision == r.point.precision && o.point.batch == r.point.batch &&
        o.point.seq == r.point.seq) {
      return &o;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<AblationRow> ablation_rows(const std::vector<PointResult>& points) {
  std::vector<AblationRow> rows;
  for (const PointResult& r : points) {
    if (r.point.variant.name.empty()) continue;
    AblationRow row;
    BenchPoint base_point = r.point;
    base_point.variant = {};
    row.base_key = base_point.key();
    row.switched = r.point.variant.name;
    const PointResult* base = base_of(points, r);
    if (!base) {
      row.error = "the preset's point was not run";
    } else if (!base->ok) {
      row.error = "the preset's point failed: " + base->error;
    } else if (!r.ok) {
      row.error = "failed: " + r.error;
    } else {
      row.ok = true;
      row.base_ms = base->ms_per_step;
      row.switched_ms = r.ms_per_step;
    }
    rows.push_back(row);
  }
  return rows;
}

std::string ablation_markdown(const std::vector<AblationRow>& rows) {
  std::string out =
      "| point | switched alone | ms/step | preset ms/step | effect ms | effect % |\n"
      "|---|---|---:|---:|---:|---:|\n";
  for (const AblationRow& r : rows) {
    if (!r.ok) {
      out += "| " + r.base_key + " | " + r.switched + " | " + markdown_cell(r.error) + " | | | |\n";
      continue;
    }
    out += "| " + r.base_key + " | " + r.switched + " | " + fixed(r.switched_ms, 3) + " | " +
           fixed(r.base_ms, 3) + " | " + fixed(r.effect_ms(), 3, true) + " | " +
           fixed(r.effect_pct(), 1, true) + " % |\n";
  }
  return out;
}

}  // namespace tinyllama::suite
