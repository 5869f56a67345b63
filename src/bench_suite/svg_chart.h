#pragma once
// Small SVG charts for the bench and compare reports: a line chart and a
// grouped bar chart over named categories (sequence lengths, batch sizes,
// levels), with axes, ticks, labels and a legend. Plain SVG 1.1 that any
// browser or image viewer shows, written without a plotting dependency.
#include <string>
#include <vector>

namespace tinyllama::suite {

struct Series {
  std::string name;
  std::vector<double> values;  // one per category; NaN: no value there
  bool markers = true;         // a marker on each value (false: the line alone)
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<std::string> categories;
  std::vector<Series> series;
  // A category label every this many categories: a training curve has
  // thousands of steps.
  std::size_t label_every = 1;
};

// Each series a polyline with a marker per value (a NaN breaks the line).
std::string line_chart_svg(const Chart& chart);
// One group of bars per category, one bar per series, each labelled with its value.
std::string bar_chart_svg(const Chart& chart);

// "1.2k", "0.35", "12": the tick and bar labels.
std::string short_number(double v);
// The axis maximum: the smallest 1, 2, 2.5 or 5 times a power of ten at or
// above max_value (1 when there is nothing positive).
double nice_axis_max(double max_value);

}  // namespace tinyllama::suite
