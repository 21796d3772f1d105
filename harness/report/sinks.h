// The report formats this room registers (report.cc's table), one file each.
#pragma once

#include <string>

#include "harness/report/report.h"

namespace collcheck {

std::string render_junit(const Report& r);  // junit.cc
std::string render_text(const Report& r);   // text.cc
std::string render_markdown(const Report& r);  // markdown.cc
std::string render_trace(const Report& r);     // trace.cc

}  // namespace collcheck
