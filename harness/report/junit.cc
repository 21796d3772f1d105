// JUnit XML, as CI systems read it: one <testsuite> per report, one <testcase>
// per verdict; a failure carries its message and body, a harness error is an
// <error>, a skipped verdict says why.
#include <fmt/format.h>

#include "harness/report/report.h"

namespace collcheck {

namespace {
std::string xml_escape(std::string_view in) {
  std::string out;
  for (char ch : in) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        // XML 1.0 forbids most control characters.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') {
          out += '?';
        } else {
          out += ch;
        }
    }
  }
  return out;
}
}  // namespace

std::string render_junit(const Report& r) {
  using S = ReportCase::Status;
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   xml_escape(r.suite), r.cases.size(), r.count(S::Failed), r.count(S::Error), r.count(S::Skipped),
                   r.seconds);
  if (!r.properties.empty()) {
    x += "  <properties>";
    for (const auto& [k, v] : r.properties)
      x += fmt::format("<property name=\"{}\" value=\"{}\"/>", xml_escape(k), xml_escape(v));
    x += "</properties>\n";
  }
  const std::string cls = "collcheck." + r.command;
  for (const auto& c : r.cases) {
    x += fmt::format("  <testcase classname=\"{}\" name=\"{}\"", xml_escape(cls), xml_escape(c.name));
    if (c.seconds > 0) x += fmt::format(" time=\"{:.3f}\"", c.seconds);
    x += ">";
    switch (c.status) {
      case S::Passed: break;
      case S::Failed:
        x += fmt::format("<failure message=\"{}\">{}</failure>", xml_escape(c.message), xml_escape(c.detail));
        break;
      case S::Error:
        x += fmt::format("<error message=\"{}\">{}</error>", xml_escape(c.message), xml_escape(c.detail));
        break;
      case S::Skipped: x += fmt::format("<skipped message=\"{}\"/>", xml_escape(c.message)); break;
    }
    x += "</testcase>\n";
  }
  x += "</testsuite>\n";
  return x;
}

}  // namespace collcheck
