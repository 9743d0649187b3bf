#include "ps/coord/etcd_client.h"

#include <curl/curl.h>

#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"

namespace ps {
namespace {

// An answer larger than this is not one etcd gives shardps.
constexpr size_t kMaxBodyBytes = 64 << 20;

struct CurlCleanup {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
using CurlHandle = std::unique_ptr<CURL, CurlCleanup>;
struct HeaderCleanup {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using HeaderList = std::unique_ptr<curl_slist, HeaderCleanup>;

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  std::string* body = static_cast<std::string*>(user);
  const size_t n = size * count;
  if (body->size() + n > kMaxBodyBytes) return 0;  // aborts the transfer
  body->append(data, n);
  return n;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  // Cannot fail for these messages (no Any, no maps of messages).
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

absl::Status FromJson(absl::string_view json,
                      google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  message->Clear();
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), message,
      options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("unreadable answer (",
                                            status.message().as_string(),
                                            "): ", json.substr(0, 200)));
  }
  return absl::OkStatus();
}

// A handle POSTing JSON to `url`; the answer goes to *body.
CurlHandle NewHandle(const std::string& url, const std::string& json,
                     std::string* body, curl_slist* headers) {
  CurlHandle h(curl_easy_init());
  if (h == nullptr) return h;
  curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.get(), CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h.get(), CURLOPT_POST, 1L);
  curl_easy_setopt(h.get(), CURLOPT_POSTFIELDSIZE,
                   static_cast<long>(json.size()));
  curl_easy_setopt(h.get(), CURLOPT_COPYPOSTFIELDS, json.c_str());
  curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, body);
  // A partition is noticed on an idle watch too.
  curl_easy_setopt(h.get(), CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h.get(), CURLOPT_TCP_KEEPIDLE, 5L);
  curl_easy_setopt(h.get(), CURLOPT_TCP_KEEPINTVL, 2L);
  return h;
}

HeaderList JsonHeaders() {
  return HeaderList(
      curl_slist_append(nullptr, "Content-Type: application/json"));
}

// etcd's refusal as a status: its gRPC code and message.
absl::Status GatewayStatus(absl::string_view endpoint, long http_code,
                           absl::string_view body) {
  shardps::etcd::GatewayError error;
  if (FromJson(body, &error).ok() && error.code() != 0) {
    return absl::Status(
        static_cast<absl::StatusCode>(error.code()),
        absl::StrCat("etcd at ", endpoint, ": ", error.message()));
  }
  const std::string message =
      absl::StrCat("etcd at ", endpoint, ": HTTP status ", http_code, " ",
                   body.substr(0, 200));
  return http_code >= 500 ? absl::UnavailableError(message)
                          : absl::InternalError(message);
}

absl::Status TransferStatus(absl::string_view endpoint, CURLcode code) {
  const std::string message =
      absl::StrCat("etcd at ", endpoint, ": ", curl_easy_strerror(code));
  return code == CURLE_OPERATION_TIMEDOUT ? absl::DeadlineExceededError(message)
                                          : absl::UnavailableError(message);
}

// What a streaming watch keeps between the pieces libcurl hands over.
struct WatchStream {
  absl::FunctionRef<bool(const shardps::etcd::WatchResponse&)> on_events;
  const std::atomic<bool>* stop;
  std::string pending;  // an incomplete line
  absl::Status status;  // of the stream, once it has failed
  bool done = false;    // on_events said to stop
};

// Hands each complete JSON line to the watcher; 0 aborts the transfer.
size_t ReadWatchLines(char* data, size_t size, size_t count, void* user) {
  WatchStream* w = static_cast<WatchStream*>(user);
  const size_t n = size * count;
  w->pending.append(data, n);
  if (w->pending.size() > kMaxBodyBytes) {
    w->status = absl::ResourceExhaustedError("a watch event over 64 MiB");
    return 0;
  }
  size_t start = 0;
  for (size_t end; (end = w->pending.find('\n', start)) != std::string::npos;
       start = end + 1) {
    const absl::string_view line(w->pending.data() + start, end - start);
    if (line.empty()) continue;
    shardps::etcd::WatchResult result;
    w->status = FromJson(line, &result);
    if (w->status.ok() && result.has_error()) {
      w->status = absl::Status(
          static_cast<absl::StatusCode>(result.error().grpc_code()),
          absl::StrCat("watch failed: ", result.error().message()));
    }
    if (w->status.ok() && result.result().canceled()) {
      w->status = absl::AbortedError(absl::StrCat(
          "etcd cancelled the watch: ", result.result().cancel_reason(),
          " (compacted to ", result.result().compact_revision(), ")"));
    }
    if (!w->status.ok()) return 0;
    if (!w->on_events(result.result())) {
      w->done = true;
      return 0;
    }
  }
  w->pending.erase(0, start);
  return n;
}

int StopWatch(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const WatchStream* w = static_cast<const WatchStream*>(user);
  return w->stop->load(std::memory_order_acquire) ? 1 : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(
    EtcdOptions options) {
  absl::string_view rest = options.endpoint;
  if (!absl::ConsumePrefix(&rest, "http://") || rest.empty() ||
      !absl::StrContains(rest, ':') || absl::StrContains(rest, '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint must be http://host:port, got '",
                     options.endpoint.substr(0, 200), "'"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd timeout must be > 0");
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(options)));
}

std::string EtcdClient::PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      ++end.back();
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::Status EtcdClient::Call(absl::string_view path,
                              const google::protobuf::Message& request,
                              google::protobuf::Message* response) const {
  const std::string url = absl::StrCat(options_.endpoint, path);
  std::string body;
  HeaderList headers = JsonHeaders();
  CurlHandle h = NewHandle(url, ToJson(request), &body, headers.get());
  if (h == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_easy_setopt(
      h.get(), CURLOPT_TIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
  const CURLcode code = curl_easy_perform(h.get());
  if (code != CURLE_OK) return TransferStatus(options_.endpoint, code);
  long http_code = 0;
  curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &http_code);
  if (http_code != 200)
    return GatewayStatus(options_.endpoint, http_code, body);
  if (absl::Status s = FromJson(body, response); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("etcd at ", options_.endpoint,
                                               path, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<shardps::etcd::RangeResponse> EtcdClient::Get(
    absl::string_view key) const {
  shardps::etcd::RangeRequest request;
  request.set_key(std::string(key));
  shardps::etcd::RangeResponse response;
  if (absl::Status s = Call("/v3/kv/range", request, &response); !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<shardps::etcd::RangeResponse> EtcdClient::GetPrefix(
    absl::string_view prefix) const {
  shardps::etcd::RangeRequest request;
  request.set_key(std::string(prefix));
  request.set_range_end(PrefixEnd(prefix));
  shardps::etcd::RangeResponse response;
  if (absl::Status s = Call("/v3/kv/range", request, &response); !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<int64_t> EtcdClient::Put(absl::string_view key,
                                        absl::string_view value,
                                        int64_t lease) const {
  shardps::etcd::PutRequest request;
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  request.set_lease(lease);
  shardps::etcd::PutResponse response;
  if (absl::Status s = Call("/v3/kv/put", request, &response); !s.ok()) {
    return s;
  }
  return response.header().revision();
}

absl::Status EtcdClient::Delete(absl::string_view key) const {
  shardps::etcd::DeleteRangeRequest request;
  request.set_key(std::string(key));
  shardps::etcd::DeleteRangeResponse response;
  return Call("/v3/kv/deleterange", request, &response);
}

absl::StatusOr<shardps::etcd::TxnResponse> EtcdClient::Txn(
    const shardps::etcd::TxnRequest& txn) const {
  shardps::etcd::TxnResponse response;
  if (absl::Status s = Call("/v3/kv/txn", txn, &response); !s.ok()) return s;
  return response;
}

absl::StatusOr<bool> EtcdClient::CreateIfAbsent(absl::string_view key,
                                                absl::string_view value,
                                                int64_t lease) const {
  shardps::etcd::TxnRequest txn;
  shardps::etcd::Compare* absent = txn.add_compare();
  absent->set_key(std::string(key));
  absent->set_target(shardps::etcd::Compare::CREATE);
  absent->set_result(shardps::etcd::Compare::EQUAL);
  absent->set_create_revision(0);
  shardps::etcd::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(std::string(key));
  put->set_value(std::string(value));
  put->set_lease(lease);
  absl::StatusOr<shardps::etcd::TxnResponse> response = Txn(txn);
  if (!response.ok()) return response.status();
  return response->succeeded();
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) const {
  shardps::etcd::LeaseGrantRequest request;
  request.set_ttl(static_cast<int64_t>(
      std::ceil(absl::ToDoubleSeconds(std::max(ttl, absl::Seconds(1))))));
  shardps::etcd::LeaseGrantResponse response;
  if (absl::Status s = Call("/v3/lease/grant", request, &response); !s.ok()) {
    return s;
  }
  if (!response.error().empty() || response.id() == 0) {
    return absl::InternalError(
        absl::StrCat("etcd at ", options_.endpoint,
                     " granted no lease: ", response.error()));
  }
  return response.id();
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAlive(int64_t lease) const {
  shardps::etcd::LeaseKeepAliveRequest request;
  request.set_id(lease);
  shardps::etcd::LeaseKeepAliveResult result;
  if (absl::Status s = Call("/v3/lease/keepalive", request, &result); !s.ok()) {
    return s;
  }
  if (result.has_error()) {
    return absl::Status(
        static_cast<absl::StatusCode>(result.error().grpc_code()),
        absl::StrCat("etcd at ", options_.endpoint,
                     " keepalive: ", result.error().message()));
  }
  if (result.result().ttl() <= 0) {
    return absl::NotFoundError(
        absl::StrCat("etcd lease ", lease, " has ended"));
  }
  return absl::Seconds(result.result().ttl());
}

absl::Status EtcdClient::RevokeLease(int64_t lease) const {
  shardps::etcd::LeaseRevokeRequest request;
  request.set_id(lease);
  shardps::etcd::LeaseKeepAliveResponse response;
  return Call("/v3/lease/revoke", request, &response);
}

absl::Status EtcdClient::Watch(
    absl::string_view prefix, int64_t start_revision,
    absl::FunctionRef<bool(const shardps::etcd::WatchResponse&)> on_events,
    const std::atomic<bool>& stop) const {
  shardps::etcd::WatchRequest request;
  shardps::etcd::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(std::string(prefix));
  create->set_range_end(PrefixEnd(prefix));
  create->set_start_revision(start_revision);
  const std::string url = absl::StrCat(options_.endpoint, "/v3/watch");
  std::string unused;
  HeaderList headers = JsonHeaders();
  CurlHandle h = NewHandle(url, ToJson(request), &unused, headers.get());
  if (h == nullptr) return absl::InternalError("curl_easy_init failed");
  WatchStream stream{on_events, &stop, std::string(), absl::OkStatus()};
  curl_easy_setopt(
      h.get(), CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, &ReadWatchLines);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &stream);
  curl_easy_setopt(h.get(), CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h.get(), CURLOPT_XFERINFOFUNCTION, &StopWatch);
  curl_easy_setopt(h.get(), CURLOPT_XFERINFODATA, &stream);
  const CURLcode code = curl_easy_perform(h.get());
  if (stream.done || stop.load(std::memory_order_acquire)) {
    return absl::OkStatus();
  }
  if (!stream.status.ok()) return stream.status;
  if (code != CURLE_OK) return TransferStatus(options_.endpoint, code);
  return absl::UnavailableError(
      absl::StrCat("etcd at ", options_.endpoint, " ended the watch"));
}

}  // namespace ps
