#include "bench_suite/plots.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bench_suite/svg_chart.h"

namespace tinyllama::suite {
namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

template <typename T>
void add_unique(std::vector<T>& list, const T& v) {
  if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
}

struct Axes {
  std::vector<std::string> levels, precisions, peers;
  std::vector<int> batches, seqs;
};

Axes axes_of(const BenchReport& report) {
  Axes a;
  for (const PointResult& r : report.points) {
    if (!r.point.variant.name.empty()) continue;
    add_unique(a.levels, r.point.level);
    add_unique(a.precisions, r.point.precision);
    add_unique(a.batches, r.point.batch);
    add_unique(a.seqs, r.point.seq);
    for (const PeerResult& p : r.peers) add_unique(a.peers, p.variant);
  }
  std::sort(a.batches.begin(), a.batches.end());
  std::sort(a.seqs.begin(), a.seqs.end());
  return a;
}

const PointResult* find(const BenchReport& report, const std::string& level,
                        const std::string& precision, int batch, int seq) {
  for (const PointResult& r : report.points) {
    if (r.point.variant.name.empty() && r.point.level == level && r.point.precision == precision &&
        r.point.batch == batch && r.point.seq == seq && r.ok) {
      return &r;
    }
  }
  return nullptr;
}

std::vector<std::string> labels(const std::vector<int>& values, const char* prefix) {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (int v : values) out.push_back(prefix + std::to_string(v));
  return out;
}

// One series per level and precision (and per peer variant and precision,
// taken from the first level's points), over the seq or batch axis.
template <typename Figure, typename PeerFigure>
std::vector<Series> series_over(const BenchReport& report, const Axes& a, bool over_seq,
                                Figure figure, PeerFigure peer_figure) {
  const std::vector<int>& xs = over_seq ? a.seqs : a.batches;
  const int fixed_batch = a.batches.front(), fixed_seq = a.seqs.front();
  std::vector<Series> out;
  for (const std::string& precision : a.precisions) {
    for (const std::string& level : a.levels) {
      Series s{level + " " + precision, {}};
      for (int x : xs) {
        const PointResult* r = over_seq ? find(report, level, precision, fixed_batch, x)
                                        : find(report, level, precision, x, fixed_seq);
        s.values.push_back(r ? figure(*r) : kNone);
      }
      out.push_back(s);
    }
    for (const std::string& peer : a.peers) {
      Series s{"torch " + peer + " " + precision, {}};
      bool any = false;
      for (int x : xs) {
        const PointResult* r = over_seq ? find(report, a.levels.front(), precision, fixed_batch, x)
                                        : find(report, a.levels.front(), precision, x, fixed_seq);
        const PeerResult* p = r ? r->peer(peer) : nullptr;
        s.values.push_back(p && p->ok ? peer_figure(*p, *r) : kNone);
        any = any || std::isfinite(s.values.back());  // a CPU peer has no memory figure
      }
      if (any) out.push_back(s);
    }
  }
  return out;
}

}  // namespace

std::vector<NamedSvg> bench_plots(const BenchReport& report) {
  const Axes a = axes_of(report);
  if (a.levels.empty()) return {};
  std::vector<NamedSvg> out;
  const int b0 = a.batches.front();

  // Speed-up of each level over the first, one series per precision and seq.
  Chart speedup{"Speed-up per level over " + a.levels.front() + " (B" + std::to_string(b0) + ")",
                "level",
                "speed-up (x)",
                a.levels,
                {}};
  for (const std::string& precision : a.precisions) {
    for (int seq : a.seqs) {
      Series s{precision + " S" + std::to_string(seq), {}};
      const PointResult* base = find(report, a.levels.front(), precision, b0, seq);
      for (const std::string& level : a.levels) {
        const PointResult* r = find(report, level, precision, b0, seq);
        s.values.push_back(base && r ? base->ms_per_step / r->ms_per_step : kNone);
      }
      speedup.series.push_back(s);
    }
  }
  out.push_back({"speedup_per_level.svg", bar_chart_svg(speedup)});

  const std::string at_b = " (B" + std::to_string(b0) + ")";
  out.push_back(
      {"time_vs_seq.svg",
       line_chart_svg(
           {"Step time against sequence length" + at_b, "sequence length", "ms per step",
            labels(a.seqs, "S"),
            series_over(
                report, a, true, [](const PointResult& r) { return r.ms_per_step; },
                [](const PeerResult& p, const PointResult&) { return p.ms_per_step; })})});
  out.push_back(
      {"memory_vs_seq.svg",
       line_chart_svg({"Peak memory against sequence length" + at_b, "sequence length", "peak MB",
                       labels(a.seqs, "S"),
                       series_over(
                           report, a, true, [](const PointResult& r) { return r.peak_mb; },
                           [](const PeerResult& p, const PointResult&) { return p.peak_mb; })})});
  const std::string at_s = " (S" + std::to_string(a.seqs.front()) + ")";
  out.push_back(
      {"throughput_vs_batch.svg",
       line_chart_svg({"Throughput against batch size" + at_s, "batch size", "tokens per second",
                       labels(a.batches, "B"),
                       series_over(
                           report, a, false, [](const PointResult& r) { return r.tokens_per_s; },
                           [](const PeerResult& p, const PointResult& r) {
                             return r.point.batch * r.point.seq / (p.ms_per_step / 1e3);
                           })})});
  return out;
}

}  // namespace tinyllama::suite
