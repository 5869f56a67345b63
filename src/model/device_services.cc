// Defaults for backends without whole-step graphs: asking one to capture is
// a programming error (callers check supports_graphs() first). And a
// readback that copies when asked, for a backend whose downloads are cheap.
#include "model/device_services.h"

#include <string>
#include <vector>

#include "core/errors.h"

namespace tinyllama {

void DeviceServices::begin_capture() {
  throw RuntimeFailure("the " + name() + " backend cannot capture graphs");
}

GraphStats DeviceServices::end_capture(bool /*instantiate*/, int /*slot*/) {
  throw RuntimeFailure("the " + name() + " backend cannot capture graphs");
}

void DeviceServices::replay(int /*slot*/) {
  throw RuntimeFailure("the " + name() + " backend has no captured graph to replay");
}

namespace {

// For backends whose host exchange is cheap or already synchronous: the
// bytes are copied when asked for.
class SyncReadback final : public HostReadback {
 public:
  SyncReadback(DeviceServices& backend, std::size_t bytes) : backend_(backend), bytes_(bytes) {}
  void copy_from(const void* src, std::size_t bytes) override {
    if (bytes > bytes_.size()) throw RuntimeFailure("readback: more bytes than it holds");
    backend_.download(bytes_.data(), src, bytes);
  }
  const void* wait() override { return bytes_.data(); }

 private:
  DeviceServices& backend_;
  std::vector<char> bytes_;
};

}  // namespace

std::unique_ptr<HostReadback> DeviceServices::make_readback(std::size_t bytes) {
  return std::make_unique<SyncReadback>(*this, bytes);
}

}  // namespace tinyllama
