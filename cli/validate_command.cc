#include "validate_command.h"

#include <iostream>
#include <vector>

#include "core/errors.h"
#include "cuda/cuda_entry.h"
#include "io/atomic_file.h"
#include "model/tolerance.h"
#include "option_value.h"
#include "train/numerics_report.h"

namespace tinyllama::cli {

ValidateCommand::ValidateCommand(CLI::App& app)
    : cmd_(app.add_subcommand(
          "validate",
          "check every level and precision against the float64 CPU reference (exit 1 on a "
          "failure)")) {
  cmd_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  value(cmd_, "--device", args_.device, "{cpu,cuda,all}",
        "which backends: cpu (float32), cuda (float32, bfloat16, float16), or all (cpu, and "
        "cuda when a CUDA device is found; without one its precisions are reported skipped)");
  value(cmd_, "--version", args_.level, "{v1,v2,v3,v4,all}", "the level(s) to check");
  value(cmd_, "--json", args_.json_path, "FILE", "write every check as JSON");
  cmd_->footer(
      "Each case trains two steps (the second a CUDA graph's first replay where the level "
      "captures) on K = H, H/2 and 1 configs and compares the loss, every gradient and the "
      "AdamW update with the float64 CPU reference on the same weights and batch. Limits: "
      "float32 1e-5 (max|err|/max|ref| per tensor), the AdamW step 1e-4 of the update, "
      "bfloat16/float16 2 x the error of the reference with every stored value rounded to "
      "that dtype, plus one ulp of it (README, `tinyllama validate`).");
}

int ValidateCommand::run() const {
  std::vector<std::string> levels;
  if (args_.level == "all") {
    levels = implemented_levels();
  } else {
    level_preset(args_.level);  // a UsageError naming the levels for a bad one
    levels = {args_.level};
  }
  if (args_.device != "cpu" && args_.device != "cuda" && args_.device != "all") {
    throw UsageError("--device " + args_.device + ": allowed values are cpu, cuda, all");
  }
  if (!args_.json_path.empty()) check_output_path("--json", args_.json_path);
  const bool gpu = cuda_device_available();
  if (args_.device == "cuda" && !gpu) {
    throw RuntimeFailure(
        "--device cuda: no CUDA device found (--device cpu checks the CPU backend)");
  }
  ValidationRun run;
  const bool cpu = args_.device != "cuda";
  const bool cuda = args_.device != "cpu" && gpu;
  if (args_.device == "all" && !gpu) {
    run.skipped.push_back("cuda float32, bfloat16, float16 (no CUDA device found)");
  }
  const std::vector<NumericsCase> cases = validation_cases(levels, cpu, cuda);
  std::cout << "validate | " << cases.size()
            << " cases: configs mha (K = H), gqa (K = H/2), mqa (K = 1), two steps each, "
               "against the float64 CPU reference\n"
            << validation_header() << std::endl;
  for (const NumericsCase& c : cases) {
    run.results.push_back(check_numerics(c));
    std::cout << validation_row(run.results.back()) << std::endl;
  }
  const std::string verdict = validation_verdict(run);
  if (!args_.json_path.empty()) {
    const std::string text = validation_json(run).dump(2) + "\n";
    std::cout.flush();
    write_atomically("--json", args_.json_path, [&](FileSink& out) { out.write(text); });
  }
  if (run.failures() > 0) {
    for (const NumericsResult& r : run.results) {
      for (const ErrorCheck& e : r.checks) {
        if (e.pass()) continue;
        std::cout << "FAIL " << r.c.config.name << " " << r.c.level << " "
                  << device_name(r.c.device) << " " << precision_label(r.c.precision) << " step "
                  << e.step << " " << e.quantity << ": " << e.error << " > " << e.limit << "\n";
      }
    }
    throw RuntimeFailure(verdict);
  }
  std::cout << verdict << std::endl;
  return 0;
}

}  // namespace tinyllama::cli
