// RandomAccessFile over HTTP: the size from a HEAD request, every read a
// range request. libcurl easy handles, each holding a kept-alive
// connection, are pooled in HttpConnections and shared by all files opened
// with it: concurrent readers each borrow one instead of reconnecting per
// read or per file. (libcurl's own shared connection cache is not safe
// across threads, hence a pool of whole handles.)
#include <curl/curl.h>

#include <cstring>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "loader/random_access_file.h"

namespace loader {
namespace {

struct CurlCleanup {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
using CurlHandle = std::unique_ptr<CURL, CurlCleanup>;

// Where a response body goes: at most `capacity` bytes into `out`.
struct Sink {
  char* out = nullptr;
  uint64_t capacity = 0;
  uint64_t received = 0;
};

size_t WriteToSink(char* data, size_t size, size_t count, void* user) {
  Sink* sink = static_cast<Sink*>(user);
  const uint64_t n = static_cast<uint64_t>(size) * count;
  if (n > sink->capacity - sink->received) return 0;  // aborts the transfer
  std::memcpy(sink->out + sink->received, data, n);
  sink->received += n;
  return n;
}

// A fresh handle with the settings every request shares. Proxies from the
// environment are ignored: storage is always addressed directly.
absl::StatusOr<CurlHandle> NewHandle() {
  CurlHandle h(curl_easy_init());
  if (h == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.get(), CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  // A transfer stalled below 1 byte/s for 60 s is an error, not a hang.
  curl_easy_setopt(h.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h.get(), CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, &WriteToSink);
  return h;
}

absl::Status TransferError(const std::string& url, CURLcode code,
                           const char* detail) {
  const std::string message =
      absl::StrCat("cannot read ", url, ": ",
                   detail[0] != '\0' ? detail : curl_easy_strerror(code));
  return code == CURLE_OPERATION_TIMEDOUT ? absl::DeadlineExceededError(message)
                                          : absl::UnavailableError(message);
}

absl::Status HttpStatusError(const std::string& url, long http_code) {
  const std::string message =
      absl::StrCat("cannot read ", url, ": HTTP status ", http_code);
  return http_code == 404 ? absl::NotFoundError(message)
                          : absl::UnavailableError(message);
}

}  // namespace

class HttpConnections {
 public:
  HttpConnections() = default;
  HttpConnections(const HttpConnections&) = delete;
  HttpConnections& operator=(const HttpConnections&) = delete;

  // An idle handle (with its connection), or a new one, set to `url`.
  absl::StatusOr<CurlHandle> Borrow(const std::string& url) {
    CurlHandle h;
    {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        h = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (h == nullptr) {
      absl::StatusOr<CurlHandle> fresh = NewHandle();
      if (!fresh.ok()) return fresh.status();
      h = *std::move(fresh);
    }
    curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
    return h;
  }

  // Returns a handle after a successful transfer, to be reused.
  void Return(CurlHandle h) {
    absl::MutexLock lock(&mu_);
    idle_.push_back(std::move(h));
  }

 private:
  absl::Mutex mu_;
  std::vector<CurlHandle> idle_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<HttpConnections> NewHttpConnections() {
  return std::make_shared<HttpConnections>();
}

namespace {

class HttpFile final : public RandomAccessFile {
 public:
  HttpFile(std::string url, uint64_t size,
           std::shared_ptr<HttpConnections> connections)
      : RandomAccessFile(std::move(url), size),
        connections_(std::move(connections)) {}
  HttpFile(const HttpFile&) = delete;
  HttpFile& operator=(const HttpFile&) = delete;

 private:
  absl::Status ReadInside(uint64_t offset, char* out,
                          uint64_t n) const override {
    absl::StatusOr<CurlHandle> h = connections_->Borrow(name());
    if (!h.ok()) return h.status();
    CURL* c = h->get();
    const std::string range = absl::StrCat(offset, "-", offset + n - 1);
    Sink sink{out, n, 0};
    char detail[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(c, CURLOPT_NOBODY, 0L);
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
    const CURLcode code = curl_easy_perform(c);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
    long http_code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http_code);
    // A server that ignores Range answers 200 with the whole file, which
    // overflows the sink unless the whole file was asked for.
    const bool whole = offset == 0 && n == size();
    if (code == CURLE_WRITE_ERROR ||
        (code == CURLE_OK && http_code == 200 && !whole)) {
      return absl::UnavailableError(
          absl::StrCat("cannot read ", name(),
                       ": the server does not honour range "
                       "requests (asked for bytes ",
                       range, ")"));
    }
    if (code != CURLE_OK) return TransferError(name(), code, detail);
    if (http_code != 206 && http_code != 200) {
      return HttpStatusError(name(), http_code);
    }
    if (sink.received != n) {
      return absl::DataLossError(
          absl::StrCat(name(), ": short read at byte offset ", offset, ": got ",
                       sink.received, " of ", n, " bytes"));
    }
    connections_->Return(*std::move(h));
    return absl::OkStatus();
  }

  const std::shared_ptr<HttpConnections> connections_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenHttpFile(
    const std::string& url, std::shared_ptr<HttpConnections> connections) {
  absl::StatusOr<CurlHandle> h = connections->Borrow(url);
  if (!h.ok()) return h.status();
  char detail[CURL_ERROR_SIZE] = {0};
  // A pooled handle may still carry the range of its last read.
  curl_easy_setopt(h->get(), CURLOPT_RANGE, nullptr);
  curl_easy_setopt(h->get(), CURLOPT_NOBODY, 1L);
  curl_easy_setopt(h->get(), CURLOPT_ERRORBUFFER, detail);
  const CURLcode code = curl_easy_perform(h->get());
  curl_easy_setopt(h->get(), CURLOPT_ERRORBUFFER, nullptr);
  if (code != CURLE_OK) return TransferError(url, code, detail);
  long http_code = 0;
  curl_easy_getinfo(h->get(), CURLINFO_RESPONSE_CODE, &http_code);
  if (http_code != 200) return HttpStatusError(url, http_code);
  curl_off_t length = -1;
  curl_easy_getinfo(h->get(), CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  if (length < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot read ", url, ": the server sent no length"));
  }
  connections->Return(*std::move(h));
  return std::make_unique<HttpFile>(url, static_cast<uint64_t>(length),
                                    std::move(connections));
}

}  // namespace loader
