// Progress of a long run on stderr, so that a user (or a CI log) sees it is
// alive: a bar redrawn in place on a terminal (done of total, per second,
// time left, what it is doing now), or a plain line every 30 s elsewhere. A
// background ticker redraws it even while the run is stuck inside one long
// step (shrinking a case that hangs until its deadline, an 82 s replay), so
// the elapsed time always moves. Stdout, where the verdict goes, is never
// touched.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace collcheck {

enum class ProgressStyle { Off, Bar, Lines };

// "auto" (a bar on a terminal, lines elsewhere), "bar" (also "on"), "lines",
// "off"; std::invalid_argument naming the choices otherwise.
ProgressStyle progress_style(std::string_view flag, std::FILE* out = stderr);

class Progress {
 public:
  // `what`: the command ("verify"); `unit`: what is counted ("cases"; "":
  // nothing, the elapsed time and the phase alone).
  // `line_every`: how often Lines prints (the bar redraws every 200 ms);
  // the environment's COLLCHECK_PROGRESS_EVERY (seconds) overrides it.
  Progress(std::string what, std::string unit, ProgressStyle style, std::FILE* out = stderr,
           std::chrono::milliseconds line_every = std::chrono::seconds(30));
  ~Progress();  // clears the bar; Lines ends with one last line when something was shown
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // done of total (0: not known) units so far.
  void count(size_t done, size_t total);
  // A limit on the whole run in seconds (time left is the nearer of it and
  // the rate's estimate); 0: none.
  void budget(double seconds);
  // The same, from now on (a phase with a budget of its own); 0: none.
  void limit_from_now(double seconds);
  // What it is doing now ("shrinking: 40 runs"); "" for the plain count.
  void phase(std::string text);

  // Erases the bar now (the next tick draws it again), before the command
  // prints a line of its own on the same terminal.
  void clear();

  // The text of one update, as drawn now (for the tests).
  std::string line() const;

 private:
  void tick();
  void draw(bool final);
  std::string line_locked(double elapsed) const;

  std::string what_, unit_;
  ProgressStyle style_;
  std::FILE* out_;
  std::chrono::milliseconds every_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool shown_ = false;
  size_t done_ = 0, total_ = 0;
  double budget_s_ = 0;
  std::string phase_;
  size_t drawn_width_ = 0;
  std::thread ticker_;
};

}  // namespace collcheck
