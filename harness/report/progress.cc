#include "harness/report/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace collcheck {

ProgressStyle progress_style(std::string_view flag, std::FILE* out) {
  if (flag == "off") return ProgressStyle::Off;
  if (flag == "bar" || flag == "on") return ProgressStyle::Bar;
  if (flag == "lines") return ProgressStyle::Lines;
  if (flag == "auto") return ::isatty(::fileno(out)) ? ProgressStyle::Bar : ProgressStyle::Lines;
  throw std::invalid_argument(fmt::format(
      "--progress must be auto (a bar on a terminal, a line every 30 s elsewhere), bar, lines or off, got '{}'", flag));
}

namespace {
std::string duration_text(double s) {
  if (s < 60) return fmt::format("{:.0f} s", s);
  if (s < 3600) return fmt::format("{}:{:02} min", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{}:{:02} h", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
}
}  // namespace

Progress::Progress(std::string what, std::string unit, ProgressStyle style, std::FILE* out,
                   std::chrono::milliseconds line_every)
    : what_(std::move(what)), unit_(std::move(unit)), style_(style), out_(out), every_(line_every),
      start_(std::chrono::steady_clock::now()) {
  // How often Lines prints, in seconds, for a CI that wants it more (or less)
  // often than every 30 s; ignored unless a number from 0.05 to 3600.
  if (const char* e = std::getenv("COLLCHECK_PROGRESS_EVERY")) {
    char* end = nullptr;
    const double v = std::strtod(e, &end);
    if (end != e && *end == '\0' && v >= 0.05 && v <= 3600) every_ = std::chrono::milliseconds(static_cast<long>(v * 1000));
  }
  if (style_ != ProgressStyle::Off) ticker_ = std::thread([this] { tick(); });
}

Progress::~Progress() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  draw(true);
}

void Progress::count(size_t done, size_t total) {
  std::lock_guard lk(mu_);
  done_ = done;
  total_ = total;
}

void Progress::budget(double seconds) {
  std::lock_guard lk(mu_);
  budget_s_ = seconds;
}

void Progress::limit_from_now(double seconds) {
  std::lock_guard lk(mu_);
  budget_s_ = seconds > 0 ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() + seconds : 0;
}

void Progress::phase(std::string text) {
  std::lock_guard lk(mu_);
  phase_ = std::move(text);
}

std::string Progress::line() const {
  std::lock_guard lk(mu_);
  return line_locked(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

std::string Progress::line_locked(double elapsed) const {
  std::string s = fmt::format("[{}] ", what_);
  if (style_ == ProgressStyle::Bar && total_ > 0) {
    constexpr size_t kWidth = 20;
    const size_t filled = std::min(kWidth, done_ * kWidth / total_);
    s += "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] ";
  }
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  if (!unit_.empty()) {  // nothing counted: the elapsed time alone
    s += total_ > 0 ? fmt::format("{}/{} {}", done_, total_, unit_) : fmt::format("{} {}", done_, unit_);
    if (done_ > 0 && total_ > 0) s += fmt::format(", {:.1f}/s", rate);
    s += ", ";
  }
  double left = -1;
  if (total_ > 0 && rate > 0) left = static_cast<double>(total_ - std::min(done_, total_)) / rate;
  if (budget_s_ > 0) left = left < 0 ? std::max(0.0, budget_s_ - elapsed) : std::min(left, std::max(0.0, budget_s_ - elapsed));
  s += fmt::format("{} elapsed", duration_text(elapsed));
  if (left >= 0) s += fmt::format(", about {} left", duration_text(left));
  if (!phase_.empty()) s += "; " + phase_;
  return s;
}

void Progress::draw(bool final) {
  std::lock_guard lk(mu_);
  if (style_ == ProgressStyle::Off) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (style_ == ProgressStyle::Bar) {
    if (final) {  // the bar goes; what the command prints stays
      if (shown_) fmt::print(out_, "\r{}\r", std::string(drawn_width_, ' '));
    } else {
      std::string l = line_locked(elapsed);
      const size_t w = l.size();
      if (w < drawn_width_) l += std::string(drawn_width_ - w, ' ');
      fmt::print(out_, "\r{}", l);
      drawn_width_ = std::max(drawn_width_, w);
      shown_ = true;
    }
  } else if (!final || shown_) {
    fmt::print(out_, "{}{}\n", line_locked(elapsed), final ? " (done)" : "");
    shown_ = true;
  }
  std::fflush(out_);
}

void Progress::clear() {
  std::lock_guard lk(mu_);
  if (style_ != ProgressStyle::Bar || !shown_) return;
  fmt::print(out_, "\r{}\r", std::string(drawn_width_, ' '));
  std::fflush(out_);
}

void Progress::tick() {
  const auto period = style_ == ProgressStyle::Bar ? std::chrono::milliseconds(200) : every_;
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (cv_.wait_for(lk, period, [this] { return stop_; })) break;
    lk.unlock();
    draw(false);
    lk.lock();
  }
}

}  // namespace collcheck
