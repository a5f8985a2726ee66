// The text form of a program, for logs, golden tests and hand-written schedules.
#include <algorithm>
#include <cctype>
#include <sstream>

#include "schedule/schedule.hpp"

namespace dynapar::schedule {
namespace {
struct token { const char* text; op kind; };
constexpr token tokens[] = {{"SA", op::send_act}, {"RA", op::recv_act}, {"SG", op::send_grad}, {"RG", op::recv_grad},
                            {"L", op::load},      {"F", op::forward},   {"B", op::backward}};
}  // namespace

std::string to_text(const program& p) {
  std::ostringstream os;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (i) os << ' ';
    const auto& in = p[i];
    for (const auto& t : tokens)
      if (t.kind == in.kind) os << t.text << in.micro;
  }
  return os.str();
}

result<program> parse(const std::string& text) {
  program out;
  std::istringstream is(text);
  std::string w;
  while (is >> w) {
    bool matched = false;
    for (const auto& t : tokens) {
      const std::string prefix = t.text;
      if (w.compare(0, prefix.size(), prefix) != 0 || w.size() == prefix.size()) continue;
      const std::string digits = w.substr(prefix.size());
      if (digits.size() > 7 || !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) break;
      out.push_back({t.kind, std::stoi(digits)});
      matched = true;
      break;
    }
    if (!matched) return make_error("bad_schedule", "unknown instruction '" + w + "'");
  }
  return out;
}

}  // namespace dynapar::schedule
