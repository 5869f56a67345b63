// Training on real text: the Debian fortunes corpus (fortunes-min, installed
// by scripts/setup) as UTF-8 text and as shards from `tinyllama prepare`;
// the loss falls well below ln(vocab), the loss of a uniform guess. And the
// one-line refusals of data that cannot be trained on.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCorpus = "/usr/share/games/fortunes/fortunes";
const std::string kCorpus2 = "/usr/share/games/fortunes/literature";

// Byte-level text: vocabulary 257. A model small enough for seconds on two cores.
const std::string kTextModel =
    "train --device cpu --vocab-size 257 --hidden-dim 32 --num-layers 1 --num-heads 2 "
    "--seq-len 32 --batch-size 8 --num-steps 80 --warmup-steps 0 --learning-rate 1e-2 "
    "--log-every 20 ";

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void require_corpus() {
  ASSERT_TRUE(fs::exists(kCorpus) && fs::exists(kCorpus2))
      << "the fortunes corpus is missing: scripts/setup installs fortunes-min";
}

TEST(DataRun, FortunesTextTrainsWellBelowTheUniformLoss) {
  require_corpus();
  const auto dir = scratch_dir("fortunes_text");
  const std::string report = (dir / "r.json").string();
  const RunResult r = run_tinyllama(kTextModel + "--data " + kCorpus + " " + kCorpus2 +
                                    " --eval-every 40 --json " + report);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "data | --data 2 files")) << r.out;
  EXPECT_TRUE(contains(r.out, "eval after step 40/80 | val loss ")) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(report));
  const nlohmann::json& evals = j["run"]["evals"];
  ASSERT_EQ(evals.size(), 2u) << j["run"].dump();
  const double uniform = std::log(257.0);
  EXPECT_NEAR(j["losses"][0].get<double>(), uniform, 0.3) << "starts near a uniform guess";
  EXPECT_LT(evals[1]["val_loss"].get<double>(), 0.65 * uniform) << "held-out loss";
  EXPECT_LT(j["final_loss"].get<double>(), 0.65 * uniform);
  fs::remove_all(dir);
}

TEST(DataRun, PreparedShardsTrainLikeTheText) {
  require_corpus();
  const auto dir = scratch_dir("fortunes_shards");
  const std::string shards = (dir / "shards").string();
  RunResult r = run_tinyllama("prepare --input " + kCorpus + " " + kCorpus2 + " --output-dir " +
                              shards + " --val-fraction 0.1 --shard-tokens 40000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto text_tokens = fs::file_size(kCorpus) + fs::file_size(kCorpus2) + 2;  // + 2 end-of-text
  std::uintmax_t shard_tokens = 0;
  int files = 0;
  for (const auto& e : fs::directory_iterator(shards)) {
    shard_tokens += (fs::file_size(e.path()) - 1024) / 2;
    ++files;
  }
  EXPECT_EQ(shard_tokens, text_tokens);
  EXPECT_GE(files, 3) << "val_000000.bin and two or more train shards of 40000 tokens";
  EXPECT_TRUE(contains(r.out, "train with --vocab-size 257 or more")) << r.out;

  r = run_tinyllama(kTextModel + "--data " + shards + "/train_*.bin --val-data " + shards +
                    "/val_000000.bin --eval-every 80");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "eval after step 80/80 | val loss ")) << r.out;

  // A second prepare into the same directory would mix two corpora.
  r = run_tinyllama("prepare --input " + kCorpus + " --output-dir " + shards);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "holds shards already")) << r.err;
  fs::remove_all(dir);
}

TEST(DataRun, DataThatCannotBeTrainedOnIsRefusedNamingTheFlag) {
  const auto dir = scratch_dir("bad_data");
  const std::string binary = (dir / "blob.bin").string();
  std::ofstream(binary, std::ios::binary) << std::string("text then \xff\xfe bytes");
  const std::string text = (dir / "t.txt").string();
  std::ofstream(text) << "a short text, long enough for a row or two of tokens\n";

  RunResult r = run_tinyllama(kTextModel + "--data " + (dir / "none_*.bin").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(
      contains(r.err, "--data " + (dir / "none_*.bin").string() + ": the pattern matches no file"))
      << r.err;
  r = run_tinyllama(kTextModel + "--data " + binary);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "invalid byte at offset 10")) << r.err;
  r = run_tinyllama(kTextModel + "--vocab-size 100 --data " + text);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--vocab-size 100: --data holds token 256")) << r.err;
  r = run_tinyllama(kTextModel + "--seq-len 200 --data " + text);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "hold no row of --seq-len + 1 = 201 tokens")) << r.err;
  r = run_tinyllama(kTextModel + "--eval-every 10");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--eval-every: needs --data")) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
