#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/errors.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, so parallel ctest runs never share files.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tinyllama_st_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// Random bytes in [1, 255]: a zero byte could hide a reader that never copied.
TensorData random_tensor(std::mt19937& rng, const std::string& dtype,
                         std::vector<std::int64_t> shape) {
  TensorData t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(static_cast<std::size_t>(t.numel()) * safetensors_dtype_size(dtype));
  std::uniform_int_distribution<int> byte(1, 255);
  for (std::uint8_t& b : t.bytes) b = static_cast<std::uint8_t>(byte(rng));
  return t;
}

NamedTensors sample_tensors() {
  std::mt19937 rng(1234);
  NamedTensors ts;
  ts.emplace_back("model.w", random_tensor(rng, "F32", {3, 5}));
  ts.emplace_back("b64", random_tensor(rng, "F64", {7}));
  ts.emplace_back("half.bf", random_tensor(rng, "BF16", {2, 3, 4}));
  ts.emplace_back("half.f", random_tensor(rng, "F16", {1}));
  ts.emplace_back("tokens", random_tensor(rng, "I32", {2, 9}));
  ts.emplace_back("ids", random_tensor(rng, "I64", {3}));
  ts.emplace_back("scalar", random_tensor(rng, "F32", {}));
  ts.emplace_back("empty", random_tensor(rng, "F32", {0, 4}));
  ts.emplace_back("bytes", random_tensor(rng, "U8", {5}));  // odd size: later data unaligned
  return ts;
}

void expect_same(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].first);
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.dtype, b[i].second.dtype);
    EXPECT_EQ(a[i].second.shape, b[i].second.shape);
    EXPECT_EQ(a[i].second.bytes, b[i].second.bytes);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i));
  return s;
}

// A file with the given header text and `data_bytes` bytes of data.
std::string raw_file(const std::string& header, std::size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\x01');
}

TEST(SafetensorsDtype, SizesOfKnownAndUnknownDtypes) {
  EXPECT_EQ(safetensors_dtype_size("F32"), 4u);
  EXPECT_EQ(safetensors_dtype_size("F64"), 8u);
  EXPECT_EQ(safetensors_dtype_size("BF16"), 2u);
  EXPECT_EQ(safetensors_dtype_size("F16"), 2u);
  EXPECT_EQ(safetensors_dtype_size("I32"), 4u);
  EXPECT_EQ(safetensors_dtype_size("I64"), 8u);
  EXPECT_EQ(safetensors_dtype_size("U8"), 1u);
  EXPECT_EQ(safetensors_dtype_size("BOOL"), 1u);
  EXPECT_EQ(safetensors_dtype_size("f32"), 0u);
  EXPECT_EQ(safetensors_dtype_size("Q4"), 0u);
}

TEST(SafetensorsDtype, NumelOfScalarAndEmpty) {
  TensorData t;
  EXPECT_EQ(t.numel(), 1);
  t.shape = {0, 4};
  EXPECT_EQ(t.numel(), 0);
  t.shape = {2, 3, 4};
  EXPECT_EQ(t.numel(), 24);
}

TEST_F(SafetensorsTest, RoundTripsSeveralDtypesWithoutMetadata) {
  const NamedTensors ts = sample_tensors();
  write_safetensors(file("a.safetensors"), ts);
  expect_same(read_safetensors(file("a.safetensors")), ts);
  EXPECT_TRUE(read_safetensors_metadata(file("a.safetensors")).empty());
  // No metadata means no "__metadata__" key at all, as the reference writer does.
  EXPECT_EQ(slurp(file("a.safetensors")).find("__metadata__"), std::string::npos);
}

TEST_F(SafetensorsTest, RoundTripsMetadata) {
  const NamedTensors ts = sample_tensors();
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"note", "a \"quoted\" value"}};
  write_safetensors(file("m.safetensors"), ts, meta);
  expect_same(read_safetensors(file("m.safetensors")), ts);
  EXPECT_EQ(read_safetensors_metadata(file("m.safetensors")), meta);
}

TEST_F(SafetensorsTest, RoundTripsNoTensors) {
  write_safetensors(file("none.safetensors"), {});
  EXPECT_TRUE(read_safetensors(file("none.safetensors")).empty());
  EXPECT_EQ(slurp(file("none.safetensors")), le64(8) + "{}      ");
}

TEST_F(SafetensorsTest, ReturnsTensorsInDataOrderNotHeaderOrder) {
  // Header keys alphabetical ("a" first) but "b"'s data comes first in the file.
  const std::string header = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[3,5]},)"
                             R"("b":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})";
  spit(file("o.safetensors"), le64(header.size()) + header + "\x01\x02\x03\x04\x05");
  const NamedTensors ts = read_safetensors(file("o.safetensors"));
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[0].first, "b");
  EXPECT_EQ(ts[0].second.bytes, (std::vector<std::uint8_t>{1, 2, 3}));
  EXPECT_EQ(ts[1].first, "a");
  EXPECT_EQ(ts[1].second.bytes, (std::vector<std::uint8_t>{4, 5}));
}

TEST_F(SafetensorsTest, HeaderLayoutIsByteExact) {
  TensorData t;
  t.dtype = "F32";
  t.shape = {2};
  const float values[2] = {1.5f, -2.0f};
  t.bytes.resize(8);
  std::memcpy(t.bytes.data(), values, 8);
  write_safetensors(file("h.safetensors"), {{"a", t}}, {{"k", "v"}});

  const std::string json =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::size_t padded = (json.size() + 7) / 8 * 8;
  const std::string expected =
      le64(padded) + json + std::string(padded - json.size(), ' ') +
      std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  const std::string actual = slurp(file("h.safetensors"));
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(actual.size() % 8, 0u);  // data section starts 8-aligned
}

TEST_F(SafetensorsTest, AtomicWriteLeavesNoTmpAndReplacesOldFile) {
  const std::string path = file("w.safetensors");
  write_safetensors(path, sample_tensors());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  NamedTensors small = {{"x", sample_tensors()[0].second}};
  write_safetensors(path, small);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  expect_same(read_safetensors(path), small);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(SafetensorsTest, WriteFailureNamesFileAndLeavesNothing) {
  const std::string path = file("missing_dir/w.safetensors");
  try {
    write_safetensors(path, sample_tensors());
    FAIL() << "expected RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0);
}

TEST_F(SafetensorsTest, WriteRejectsInconsistentTensors) {
  TensorData bad;
  bad.dtype = "F32";
  bad.shape = {3};
  bad.bytes.resize(8);  // 3 floats need 12
  EXPECT_THROW(write_safetensors(file("x.safetensors"), {{"bad", bad}}), RuntimeFailure);
  bad.bytes.resize(12);
  EXPECT_THROW(write_safetensors(file("x.safetensors"), {{"d", bad}, {"d", bad}}), RuntimeFailure);
  EXPECT_THROW(write_safetensors(file("x.safetensors"), {{"__metadata__", bad}}), RuntimeFailure);
  bad.dtype = "F33";
  EXPECT_THROW(write_safetensors(file("x.safetensors"), {{"bad", bad}}), RuntimeFailure);
  EXPECT_FALSE(fs::exists(file("x.safetensors")));
  EXPECT_FALSE(fs::exists(file("x.safetensors.tmp")));
}

struct Corruption {
  const char* name;
  std::string bytes;     // the whole file
  const char* fragment;  // expected in the message
};

std::vector<Corruption> corruptions() {
  const std::string ok_entry = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  return {
      {"too_short", std::string("\x08\x00\x00", 3), "too short (3 bytes)"},
      {"header_beyond_file", le64(1000) + "{}", "header length 1000 exceeds"},
      {"invalid_json", raw_file("{\"a\": [1, 2", 0), "not valid JSON"},
      {"not_an_object", raw_file("[1, 2, 3]", 0), "not a JSON object"},
      {"unknown_dtype", raw_file(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", 8),
       "unknown dtype 'F31'"},
      {"shape_times_dtype",
       raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "12 bytes"},
      {"negative_dim", raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "non-negative"},
      {"huge_shape",
       raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "too large"},
      {"missing_offsets", raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", 8), "data_offsets"},
      {"offsets_out_of_range", raw_file(ok_entry, 4), "beyond the 4 data bytes"},
      {"offsets_reversed", raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "begin after end"},
      {"overlapping",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                12),
       "overlap"},
      {"gap",
       raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                12),
       "bytes [4, 8] belong to no tensor"},
      {"trailing_data", raw_file(ok_entry, 12), "bytes [8, 12] belong to no tensor"},
      {"bad_metadata", raw_file(R"({"__metadata__":{"k":1}})", 0), "is not a string"},
      // JSON allows a key twice (nlohmann keeps the last): which tensor is meant?
      {"duplicate_tensor",
       raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                8),
       "names the key 'a' twice"},
      {"duplicate_field",
       raw_file(R"({"a":{"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]}})", 8),
       "names the key 'dtype' twice"},
      {"number_overflow",
       raw_file(R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}})", 8),
       "number too large to represent"},
      {"offset_beyond_64_bits",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,99999999999999999999999]}})",
                8),
       "too large for 64 bits"},
      // A control character in a name is shown escaped, never sent raw.
      {"control_character_in_name",
       raw_file("{\"a\\u001b[2J\\n\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8),
       "tensor 'a\\x1b[2J\\x0a' has unknown dtype"},
  };
}

TEST_F(SafetensorsTest, RejectsEachCorruptionWithOneLineNamingTheFile) {
  for (const Corruption& c : corruptions()) {
    SCOPED_TRACE(c.name);
    const std::string path = file(std::string(c.name) + ".safetensors");
    spit(path, c.bytes);
    try {
      read_safetensors(path);
      ADD_FAILURE() << "accepted a corrupt file";
    } catch (const RuntimeFailure& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(c.fragment), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
    }
    EXPECT_THROW(read_safetensors_metadata(path), RuntimeFailure);
    // The in-memory parser (the fuzz target's) judges the bytes alike.
    const auto* data = reinterpret_cast<const std::uint8_t*>(c.bytes.data());
    EXPECT_THROW(parse_safetensors("buffer", data, c.bytes.size()), RuntimeFailure);
  }
}

TEST_F(SafetensorsTest, MissingFileNamesTheFile) {
  const std::string path = file("nope.safetensors");
  try {
    read_safetensors(path);
    FAIL() << "expected RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

TEST_F(SafetensorsTest, AcceptsEmptyTensorsSharingAnOffset) {
  const std::string header = R"({"e1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                             R"("e2":{"dtype":"I64","shape":[0,3],"data_offsets":[0,0]},)"
                             R"("x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  spit(file("e.safetensors"), raw_file(header, 1));
  const NamedTensors ts = read_safetensors(file("e.safetensors"));
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[2].first, "x");
}

}  // namespace
}  // namespace tinyllama
