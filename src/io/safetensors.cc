#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "io/atomic_file.h"

namespace tinyllama {

// Tensor bytes go to and from disk by memcpy; a big-endian host would need swaps.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

// The reference implementation refuses larger headers; a bigger claim means a
// corrupt file and must not make us allocate that much.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw RuntimeFailure(path + ": " + problem);
}

// Names come from the file: a control character in one must not reach the
// terminal (or split the one-line error) as it is.
std::string in_quotes(const std::string& name) {
  std::string out = "'";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string span_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// A tensor's header entry once validated; `begin`/`end` are relative to the
// start of the data section, as in the format.
struct Entry {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

struct Header {
  std::vector<Entry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  // file offset of the data section
};

std::uint64_t json_unsigned(const std::string& path, const std::string& what,
                            const nlohmann::json& v) {
  if (v.is_number_float() && v.get<double>() >= 0x1p64) {
    fail(path, what + " is a number too large for 64 bits");
  }
  if (!v.is_number_unsigned()) fail(path, what + " must be a non-negative integer");
  return v.get<std::uint64_t>();
}

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v,
                  std::uint64_t data_size) {
  const std::string where = "tensor " + in_quotes(name);
  if (!v.is_object()) fail(path, where + ": header entry is not a JSON object");
  const auto dtype = v.find("dtype");
  const auto shape = v.find("shape");
  const auto offsets = v.find("data_offsets");
  if (dtype == v.end() || !dtype->is_string()) fail(path, where + ": missing string \"dtype\"");
  if (shape == v.end() || !shape->is_array()) fail(path, where + ": missing array \"shape\"");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
    fail(path, where + ": \"data_offsets\" must be [begin, end]");
  }

  Entry e;
  e.name = name;
  e.dtype = dtype->get<std::string>();
  const std::size_t elem = safetensors_dtype_size(e.dtype);
  if (elem == 0) fail(path, where + " has unknown dtype " + in_quotes(e.dtype));

  // Multiply with an overflow guard: a huge shape must not wrap around to a
  // byte count that happens to match the span.
  std::uint64_t bytes = elem;
  for (const nlohmann::json& d : *shape) {
    const std::uint64_t dim = json_unsigned(path, where + ": shape entry", d);
    const bool too_big =
        dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        (dim != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / dim);
    if (too_big) fail(path, where + " has a shape too large to address");
    bytes *= dim;
    e.shape.push_back(static_cast<std::int64_t>(dim));
  }

  e.begin = json_unsigned(path, where + ": data_offsets entry", (*offsets)[0]);
  e.end = json_unsigned(path, where + ": data_offsets entry", (*offsets)[1]);
  const std::string span = span_text(e.begin, e.end);
  if (e.begin > e.end) fail(path, where + " has data_offsets " + span + " with begin after end");
  if (e.end > data_size) {
    fail(path, where + " has data_offsets " + span + " beyond the " + std::to_string(data_size) +
                   " data bytes in the file");
  }
  if (bytes != e.end - e.begin) {
    fail(path, where + " has shape " + shape_text(e.shape) + " of " + e.dtype + " (" +
                   std::to_string(bytes) + " bytes) but data_offsets " + span + " span " +
                   std::to_string(e.end - e.begin) + " bytes");
  }
  return e;
}

std::map<std::string, std::string> parse_metadata(const std::string& path,
                                                  const nlohmann::json& v) {
  if (!v.is_object()) fail(path, std::string(kMetadataKey) + " is not a JSON object");
  std::map<std::string, std::string> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it->is_string()) {
      fail(path, std::string(kMetadataKey) + " value " + in_quotes(it.key()) + " is not a string");
    }
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

// The tensors must tile the data section exactly: an overlap would alias two
// tensors, and a gap or a tail means bytes we would silently ignore.
void check_tiling(const std::string& path, const std::vector<Entry>& sorted,
                  std::uint64_t data_size) {
  std::uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : sorted) {
    if (e.begin < covered) {
      fail(path, "tensors " + in_quotes(prev->name) + " and " + in_quotes(e.name) +
                     " overlap (data_offsets " + span_text(prev->begin, prev->end) + " and " +
                     span_text(e.begin, e.end) + ")");
    }
    if (e.begin > covered) {
      fail(path, "data bytes " + span_text(covered, e.begin) + " belong to no tensor");
    }
    covered = e.end;
    prev = &e;
  }
  if (covered != data_size) {
    fail(path, "data bytes " + span_text(covered, data_size) + " belong to no tensor");
  }
}

// The 8-byte little-endian header length, checked against the file size.
std::uint64_t header_length(const std::string& path, const unsigned char* prefix,
                            std::uint64_t file_size) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  if (n > file_size - 8) {
    fail(path, "header length " + std::to_string(n) + " exceeds the " +
                   std::to_string(file_size - 8) +
                   " bytes after the length prefix (not a safetensors file?)");
  }
  if (n > kMaxHeaderBytes) {
    fail(path, "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  }
  return n;
}

void require_prefix(const std::string& path, std::uint64_t file_size) {
  if (file_size < 8) {
    fail(path, "file is too short (" + std::to_string(file_size) + " bytes) to be safetensors");
  }
}

// JSON allows a key twice and nlohmann keeps the last one; a header that
// names a tensor (or a field) twice is ambiguous and refused.
nlohmann::json parse_json_header(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  const nlohmann::json::parser_callback_t check =
      [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using Event = nlohmann::json::parse_event_t;
        if (event == Event::object_start) keys.emplace_back();
        if (event == Event::object_end && !keys.empty()) keys.pop_back();
        if (event == Event::key && !keys.empty() && duplicate.empty() &&
            !keys.back().insert(parsed.get<std::string>()).second) {
          duplicate = parsed.get<std::string>();
        }
        return true;
      };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::parse_error& e) {
    fail(path,
         "header is not valid JSON (error at byte " + std::to_string(e.byte) + " of the header)");
  } catch (const nlohmann::json::out_of_range&) {
    fail(path, "header holds a number too large to represent (JSON number overflow)");
  } catch (const nlohmann::json::exception&) {
    fail(path, "header is not valid JSON");
  }
  if (!duplicate.empty()) fail(path, "header names the key " + in_quotes(duplicate) + " twice");
  return j;
}

// Validates everything but the tensor data, from the header's JSON text.
Header parse_header(const std::string& path, const std::string& text, std::uint64_t file_size) {
  const nlohmann::json j = parse_json_header(path, text);
  if (!j.is_object()) fail(path, "header is not a JSON object");

  Header h;
  h.data_start = 8 + text.size();
  const std::uint64_t data_size = file_size - h.data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kMetadataKey) {
      h.metadata = parse_metadata(path, *it);
    } else {
      h.entries.push_back(parse_entry(path, it.key(), *it, data_size));
    }
  }
  // Stable on ties so that several empty tensors at one offset keep a fixed order.
  std::stable_sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  check_tiling(path, h.entries, data_size);
  return h;
}

// Reads and validates everything but the tensor data; leaves `in` open.
Header read_header(const std::string& path, std::ifstream& in) {
  in.open(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot determine the file size: " + ec.message());
  require_prefix(path, file_size);

  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  if (!in) fail(path, "cannot read the header length");
  const std::uint64_t n = header_length(path, prefix, file_size);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) fail(path, "cannot read the " + std::to_string(n) + "-byte header");
  return parse_header(path, text, file_size);
}

// The header for `tensors` packed back to back in the given order, with the
// metadata first (insertion-ordered JSON keeps the file readable by eye).
std::string make_header(const std::string& path, const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h[kMetadataKey] = metadata;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::string where = "cannot write tensor " + in_quotes(name);
    if (name == kMetadataKey || !seen.insert(name).second) {
      fail(path, where + ": duplicate or reserved name");
    }
    const std::size_t elem = safetensors_dtype_size(t.dtype);
    if (elem == 0) fail(path, where + ": unknown dtype " + in_quotes(t.dtype));
    if (std::any_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d < 0; })) {
      fail(path, where + ": negative dimension in shape " + shape_text(t.shape));
    }
    if (static_cast<std::uint64_t>(t.numel()) * elem != t.bytes.size()) {
      fail(path, where + ": shape " + shape_text(t.shape) + " of " + t.dtype +
                     " does not match its " + std::to_string(t.bytes.size()) + " bytes");
    }
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = t.dtype;
    entry["shape"] = t.shape;
    entry["data_offsets"] = nlohmann::ordered_json::array({offset, offset + t.bytes.size()});
    h[name] = std::move(entry);
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::json::exception&) {
    fail(path, "cannot write: a tensor name or metadata string is not valid UTF-8");
  }
  // Padding to 8 keeps the data section aligned for readers that mmap it.
  text.resize((text.size() + 7) / 8 * 8, ' ');
  return text;
}

}  // namespace

std::int64_t TensorData::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, std::size_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  const auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = make_header(path, tensors, metadata);
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(header.size() >> (8 * i));

  write_atomically("", path, [&](FileSink& out) {
    out.write(prefix, sizeof prefix);
    out.write(header);
    for (const auto& [name, t] : tensors) out.write(t.bytes.data(), t.bytes.size());
  });
}

NamedTensors read_safetensors(const std::string& path) {
  std::ifstream in;
  const Header h = read_header(path, in);
  NamedTensors out;
  out.reserve(h.entries.size());
  // Validated tiling means the entries are contiguous from data_start on.
  for (const Entry& e : h.entries) {
    TensorData t;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.bytes.resize(e.end - e.begin);
    in.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
    if (!in) {
      fail(path,
           "cannot read the data of tensor " + in_quotes(e.name) + " (file changed or unreadable)");
    }
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

NamedTensors parse_safetensors(const std::string& name, const std::uint8_t* data,
                               std::size_t size) {
  require_prefix(name, size);
  const std::uint64_t n = header_length(name, data, size);
  const Header h =
      parse_header(name, std::string(reinterpret_cast<const char*>(data) + 8, n), size);
  NamedTensors out;
  out.reserve(h.entries.size());
  for (const Entry& e : h.entries) {
    TensorData t;
    t.dtype = e.dtype;
    t.shape = e.shape;
    const std::uint8_t* begin = data + h.data_start + e.begin;
    t.bytes.assign(begin, begin + (e.end - e.begin));
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  std::ifstream in;
  return read_header(path, in).metadata;
}

}  // namespace tinyllama
