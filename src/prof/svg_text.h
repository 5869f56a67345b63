#pragma once
// Text for the small hand-written SVG documents (the memory timeline here,
// the bench and compare charts in bench_suite/svg_chart.h): escaping for
// element text and attribute values.
#include <string>

namespace tinyllama::prof {

// text with &, <, > and " as XML entities, for element text and attribute values.
std::string svg_escape(const std::string& text);

}  // namespace tinyllama::prof
