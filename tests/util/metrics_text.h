// Reading Prometheus metrics in tests: fetching an endpoint's page over
// HTTP and picking one series' value out of the text format.
#ifndef SHARDPS_TESTS_UTIL_METRICS_TEXT_H_
#define SHARDPS_TESTS_UTIL_METRICS_TEXT_H_

#include <curl/curl.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace testutil {

// The body of GET `url`; an error for a refused connection or a status
// other than 200.
inline absl::StatusOr<std::string> HttpGet(const std::string& url) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(),
                                              &curl_easy_cleanup);
  std::string body;
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(
      curl.get(), CURLOPT_WRITEFUNCTION,
      +[](char* data, size_t size, size_t count, void* out) {
        static_cast<std::string*>(out)->append(data, size * count);
        return size * count;
      });
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &body);
  const CURLcode code = curl_easy_perform(curl.get());
  if (code != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat(url, ": ", curl_easy_strerror(code)));
  }
  long status = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    return absl::UnavailableError(absl::StrCat(url, ": HTTP ", status));
  }
  return body;
}

// The value of `series` (name and labels exactly as printed, e.g.
// `x_total{method="Push"}`) in a text-format page; NaN when absent.
inline double SeriesValue(const std::string& page, absl::string_view series) {
  std::istringstream lines(page);
  std::string line;
  while (std::getline(lines, line)) {
    if (absl::string_view(line).substr(0, series.size()) != series ||
        line.size() <= series.size() || line[series.size()] != ' ') {
      continue;
    }
    double value;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return std::nan("");
}

// A registry's page, as an endpoint would serve it.
inline std::string RegistryText(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_METRICS_TEXT_H_
