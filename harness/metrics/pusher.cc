#include "harness/metrics/pusher.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "harness/metrics/metrics.h"

namespace collcheck {

namespace {

std::string escape_path(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

struct Body {
  const std::string* text;
  size_t off = 0;
};

size_t read_body(char* buf, size_t size, size_t n, void* user) {
  auto* b = static_cast<Body*>(user);
  const size_t k = std::min(size * n, b->text->size() - b->off);
  std::memcpy(buf, b->text->data() + b->off, k);
  b->off += k;
  return k;
}

size_t discard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

PushTarget push_target(const std::string& gateway, const std::string& job, const std::string& instance) {
  std::string scheme = "http://", rest = gateway;
  for (const char* s : {"http://", "https://"})
    if (rest.rfind(s, 0) == 0) {
      scheme = s;
      rest = rest.substr(std::strlen(s));
    }
  if (rest.find("://") != std::string::npos)
    throw std::invalid_argument(
        fmt::format("--pushgateway: the scheme must be http:// or https://, or none, got '{}'", gateway));
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos)
    throw std::invalid_argument(
        fmt::format("--pushgateway must be [http://]HOST:PORT with no path (the job's path is added), got '{}'", gateway));
  const auto [host, port] = split_host_port(rest, "--pushgateway");
  std::string url = fmt::format("{}{}:{}/metrics/job/{}", scheme, host, port, escape_path(job));
  if (!instance.empty()) url += "/instance/" + escape_path(instance);
  return {url, host + ":" + port};
}

Pusher::Pusher(PushTarget target, std::chrono::milliseconds connect, std::chrono::milliseconds total, Say say)
    : target_(std::move(target)), connect_(connect), total_(total), say_(std::move(say)) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  thread_ = std::thread([this] { run(); });
}

Pusher::~Pusher() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // A push in flight ends by its own total timeout.
  thread_.join();
}

void Pusher::push(std::string text) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending_ = std::move(text);
  }
  cv_.notify_all();
}

bool Pusher::flush(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_for(lk, wait, [&] { return !pending_ && !busy_; });
}

uint64_t Pusher::attempts() const {
  std::lock_guard<std::mutex> lk(mu_);
  return attempts_;
}
uint64_t Pusher::failures() const {
  std::lock_guard<std::mutex> lk(mu_);
  return failures_;
}
std::string Pusher::last_error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return last_error_;
}

void Pusher::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || pending_; });
    if (!pending_) return;  // stopped with nothing left to push
    const std::string text = std::move(*pending_);
    pending_.reset();
    busy_ = true;
    lk.unlock();
    const std::string err = put(text);
    lk.lock();
    busy_ = false;
    ++attempts_;
    if (!err.empty()) {
      ++failures_;
      if (last_error_.empty()) {
        failing_since_ = attempts_;
        say_(fmt::format("--pushgateway {}: push failed: {} (said once; pushes go on)", target_.shown, err));
      }
    } else if (!last_error_.empty()) {
      say_(fmt::format("--pushgateway {}: pushes work again after {} failed", target_.shown, attempts_ - failing_since_));
    }
    last_error_ = err;
    cv_.notify_all();
    if (stop_ && !pending_) return;
  }
}

std::string Pusher::put(const std::string& text) const {
  CURL* c = curl_easy_init();
  if (!c) return "libcurl could not start";
  Body body{&text};
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: text/plain; version=0.0.4");
  curl_easy_setopt(c, CURLOPT_URL, target_.url.c_str());
  curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);  // PUT
  curl_easy_setopt(c, CURLOPT_READFUNCTION, read_body);
  curl_easy_setopt(c, CURLOPT_READDATA, &body);
  curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(text.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(total_.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: this is one thread of many
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return fmt::format("no answer within {:.0f} s", std::chrono::duration<double>(total_).count());
  if (rc == CURLE_COULDNT_CONNECT) return fmt::format("cannot connect ({})", errbuf[0] ? errbuf : "refused");
  if (rc == CURLE_COULDNT_RESOLVE_HOST) return "cannot resolve the host name";
  if (rc != CURLE_OK) return fmt::format("{} ({})", curl_easy_strerror(rc), errbuf);
  if (status < 200 || status >= 300) return fmt::format("the gateway answered HTTP {}", status);
  return "";
}

}  // namespace collcheck
