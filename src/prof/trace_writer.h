#pragma once
// trace.json in the Chrome trace event format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: the host's op ranges nested
// step -> phase -> layer -> op on one track, the CUDA API calls on a second,
// and each GPU stream on its own track, with a flow arrow from every launch
// call to the kernel it launched (the link is CUPTI's correlation id, also
// in both events' args).
#include <nlohmann/json_fwd.hpp>

#include "prof/attribution.h"
#include "prof/profile_summary.h"

namespace tinyllama::prof {

nlohmann::json chrome_trace(const ProfileInputs& in, const Attribution& attribution);

}  // namespace tinyllama::prof
