// tinyllama's command line: dispatch to a command, and turn every failure
// into one line and an exit code (DESIGN §4: 2 bad usage, 1 runtime failure;
// never a stack trace).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "bench_command.h"
#include "compare_command.h"
#include "core/errors.h"
#include "generate_command.h"
#include "kernels_command.h"
#include "ops/linear/cpu_blas.h"
#include "parallel_run.h"
#include "parse_error.h"
#include "plot_command.h"
#include "prepare_command.h"
#include "tokenizer_command.h"
#include "train_command.h"
#include "tune_command.h"
#include "validate_command.h"
#include "version.h"

namespace {

int fail(int code, std::string message) {
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  std::cout.flush();  // keep step lines printed so far ahead of the error
  // A rank of a data-parallel run says which one it is (the launcher
  // prints every rank's stderr together).
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  const bool ranked = rank != nullptr && world != nullptr && *rank != '\0';
  std::cerr << (ranked ? "rank " + std::string(rank) + ": " : std::string()) << "error: " << message
            << std::endl;
  return code;
}

int run_cli(int argc, char** argv) {
  using namespace tinyllama;
  CLI::App app(
      "tinyllama: trains the workshop's Tiny LLaMA model on CPU or CUDA and reports its speed.",
      "tinyllama");
  app.set_version_flag("--version", cli::version_text,
                       "print the version and the build's CUDA/cuDNN versions, then exit");
  cli::TrainCommand train(app);
  cli::KernelsCommand kernels(app);
  cli::PrepareCommand prepare(app);
  cli::GenerateCommand generate(app);
  cli::TokenizerCommand tokenizer(app);
  cli::TuneCommand tune(app);
  cli::BenchCommand bench(app);
  cli::CompareCommand compare(app);
  cli::ValidateCommand validate(app);
  cli::PlotCommand plot(app);
  try {
    app.parse(argc, argv);
    if (train.selected()) return train.run();
    if (kernels.selected()) return kernels.run();
    if (prepare.selected()) return prepare.run();
    if (generate.selected()) return generate.run();
    if (tokenizer.selected()) return tokenizer.run();
    if (tune.selected()) return tune.run();
    if (bench.selected()) return bench.run();
    if (compare.selected()) return compare.run();
    if (validate.selected()) return validate.run();
    if (plot.selected()) return plot.run();
    throw UsageError(
        "missing command; available: train, kernels, prepare, generate, tokenizer, tune, bench, "
        "compare, validate, plot (see 'tinyllama --help')");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return fail(kExitUsage, cli::one_line_parse_error(e, app));
  } catch (const UsageError& e) {
    return fail(kExitUsage, e.what());
  } catch (const RuntimeFailure& e) {
    return fail(kExitRuntime, e.what());
  } catch (const std::bad_alloc&) {
    return fail(kExitRuntime, "out of host memory");
  } catch (const std::exception& e) {
    return fail(kExitRuntime, e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything: the CPU path's GEMMs on the best OpenBLAS kernels this
  // CPU runs (may re-execute the process once; ops/linear/cpu_blas_kernels.h).
  tinyllama::cpu::use_best_blas_kernels(argv);
  // Only setting up the command line itself is left to fail here.
  try {
    tinyllama::cli::remember_process_args(argc, argv);
    return run_cli(argc, argv);
  } catch (...) {
    return fail(tinyllama::kExitRuntime, "internal error while setting up the command line");
  }
}
