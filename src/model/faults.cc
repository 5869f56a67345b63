#include "model/faults.h"

#include "core/errors.h"

namespace tinyllama {

const std::vector<std::string>& fault_names() {
  static const std::vector<std::string> names = {"broken-init", "noncontiguous-kv",
                                                 "unsynced-timing", "naive-swiglu"};
  return names;
}

std::vector<std::string> InjectedFaults::names() const {
  const bool set[] = {broken_init, noncontiguous_kv, unsynced_timing, naive_swiglu};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < fault_names().size(); ++i) {
    if (set[i]) out.push_back(fault_names()[i]);
  }
  return out;
}

void add_fault(InjectedFaults& faults, const std::string& name) {
  const std::size_t comma = name.find(',');
  if (comma != std::string::npos) {
    add_fault(faults, name.substr(0, comma));
    add_fault(faults, name.substr(comma + 1));
    return;
  }
  bool* const flags[] = {&faults.broken_init, &faults.noncontiguous_kv, &faults.unsynced_timing,
                         &faults.naive_swiglu};
  for (std::size_t i = 0; i < fault_names().size(); ++i) {
    if (name == fault_names()[i]) {
      *flags[i] = true;
      return;
    }
  }
  std::string allowed;
  for (const std::string& n : fault_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw UsageError("--inject " + name + ": allowed values are " + allowed);
}

}  // namespace tinyllama
