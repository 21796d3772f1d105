#include "harness/report/events.h"

#include <stdexcept>

namespace collcheck {

namespace {
struct Namer {
  const char* operator()(const TextEvent&) const { return "text"; }
  const char* operator()(const CaseStartedEvent&) const { return "case"; }
  const char* operator()(const VerdictEvent&) const { return "verdict"; }
  const char* operator()(const FindingEvent&) const { return "finding"; }
  const char* operator()(const RowEvent&) const { return "row"; }
  const char* operator()(const UnitEvent&) const { return "unit"; }
  const char* operator()(const ProgressEvent&) const { return "progress"; }
};

struct ToJson {
  nlohmann::json& j;
  void operator()(const TextEvent& e) const {
    j["to"] = e.to == TextEvent::To::Out ? "out" : "err";
    j["text"] = e.text;
  }
  void operator()(const CaseStartedEvent& e) const {
    j["index"] = e.index;
    j["total"] = e.total;
    j["seed"] = e.seed;
    if (!e.replay.empty()) j["replay"] = e.replay;
  }
  void operator()(const VerdictEvent& e) const {
    j["name"] = e.verdict.name;
    j["status"] = report_status_name(e.verdict.status);
    j["message"] = e.verdict.message;
    j["detail"] = e.verdict.detail;
    j["seconds"] = e.verdict.seconds;
  }
  void operator()(const FindingEvent& e) const {
    j["kind"] = e.kind;
    j["text"] = e.text;
    j["replay"] = e.replay;
  }
  void operator()(const RowEvent& e) const { j["row"] = e.row; }
  void operator()(const UnitEvent& e) const { j["unit"] = e.unit; }
  void operator()(const ProgressEvent& e) const {
    if (e.count) j["done"] = e.count->first, j["total"] = e.count->second;
    if (e.budget_s) j["budget_s"] = *e.budget_s;
    if (e.limit_from_now_s) j["limit_from_now_s"] = *e.limit_from_now_s;
    if (e.phase) j["phase"] = *e.phase;
    if (e.end) j["end"] = true;
  }
};

class ConsoleSink final : public EventSink {
 public:
  ConsoleSink(std::FILE* out, std::FILE* err) : out_(out), err_(err) {}
  void on(const Event& e) override {
    const auto* t = std::get_if<TextEvent>(&e);
    if (!t) return;
    std::FILE* to = t->to == TextEvent::To::Out ? out_ : err_;
    std::fwrite(t->text.data(), 1, t->text.size(), to);
    std::fflush(to);  // a log file or a pipe sees each line when it happens (a soak's hours)
  }
  void close() override { std::fflush(out_); }

 private:
  std::FILE* out_;
  std::FILE* err_;
};

class TextCollector final : public EventSink {
 public:
  explicit TextCollector(std::string& into) : into_(into) {}
  void on(const Event& e) override {
    if (const auto* t = std::get_if<TextEvent>(&e)) into_ += t->text;
  }

 private:
  std::string& into_;
};

class ProgressSink final : public EventSink {
 public:
  ProgressSink(std::string what, std::string unit, ProgressStyle style, std::FILE* out,
               std::chrono::milliseconds line_every)
      : what_(std::move(what)), unit_(std::move(unit)), style_(style), out_(out), every_(line_every) {}
  void on(const Event& e) override {
    if (const auto* t = std::get_if<TextEvent>(&e)) {
      // A line of the command's own on the terminal: the bar makes way (the
      // next tick draws it again).
      if (bar_ && t->to == TextEvent::To::Err) bar_->clear();
      return;
    }
    const auto* p = std::get_if<ProgressEvent>(&e);
    if (!p || style_ == ProgressStyle::Off) return;
    if (p->end) {
      bar_.reset();
      return;
    }
    if (!bar_) bar_.emplace(what_, unit_, style_, out_, every_);
    if (p->count) bar_->count(p->count->first, p->count->second);
    if (p->budget_s) bar_->budget(*p->budget_s);
    if (p->limit_from_now_s) bar_->limit_from_now(*p->limit_from_now_s);
    if (p->phase) bar_->phase(*p->phase);
  }
  void close() override { bar_.reset(); }

 private:
  std::string what_, unit_;
  ProgressStyle style_;
  std::FILE* out_;
  std::chrono::milliseconds every_;
  std::optional<Progress> bar_;
};
}  // namespace

const char* event_name(const Event& e) { return std::visit(Namer{}, e); }

nlohmann::json event_json(const Event& e) {
  nlohmann::json j;
  j["event"] = event_name(e);
  std::visit(ToJson{j}, e);
  return j;
}

void Events::add(std::shared_ptr<EventSink> sink, bool first) {
  std::lock_guard lk(mu_);
  sinks_.insert(first ? sinks_.begin() : sinks_.end(), std::move(sink));
}

void Events::emit(const Event& e) {
  std::lock_guard lk(mu_);
  for (const auto& s : sinks_) s->on(e);
}

void Events::close() {
  std::lock_guard lk(mu_);
  if (closed_) return;
  closed_ = true;
  std::string failed;
  for (const auto& s : sinks_) {
    try {
      s->close();
    } catch (const std::exception& x) {
      failed += (failed.empty() ? "" : "; ") + std::string(x.what());
    }
  }
  if (!failed.empty()) throw std::runtime_error(failed);
}

std::shared_ptr<EventSink> console_sink(std::FILE* out, std::FILE* err) { return std::make_shared<ConsoleSink>(out, err); }

std::shared_ptr<EventSink> text_collector(std::string& into) { return std::make_shared<TextCollector>(into); }

std::shared_ptr<EventSink> progress_sink(std::string what, std::string unit, ProgressStyle style, std::FILE* out,
                                         std::chrono::milliseconds line_every) {
  return std::make_shared<ProgressSink>(std::move(what), std::move(unit), style, out, line_every);
}

}  // namespace collcheck
