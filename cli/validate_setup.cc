#include "validate_setup.h"

#include <iostream>

#include "core/errors.h"
#include "train/exercise_report.h"
#include "train/report.h"
#include "train/run_setup.h"
#include "train/setup_check.h"

namespace tinyllama::cli {

int run_validate_setup(TrainOptions opts) {
  opts = setup_check_options(std::move(opts));
  for (const std::string& note : resolve_run(opts)) std::cerr << "note: " << note << std::endl;
  std::cout << format_run_header(opts) << "\nvalidate-setup | " << opts.num_steps
            << " steps at batch " << opts.shape.batch << std::endl;
  const SetupCheck check = check_setup(opts, [](const SetupCheck::Item& item) {
    std::cout << "  " << (item.pass ? "ok   " : "FAIL ") << item.what << std::endl;
  });
  if (!check.pass()) throw RuntimeFailure("validate-setup: FAIL: " + check.first_failure());
  std::cout << "validate-setup: PASS" << std::endl;
  return 0;
}

void print_exercise_lines(const StepRecord& rec, const TrainOptions& opts, bool warmup,
                          ProgressLine& progress) {
  if (rec.logits) {
    progress.clear();
    std::cout << format_logit_line(rec, opts, warmup) << std::endl;
  }
  if (opts.faults.unsynced_timing) {
    progress.clear();
    std::cout << format_host_timing_line(rec, opts, warmup) << std::endl;
  }
}

}  // namespace tinyllama::cli
