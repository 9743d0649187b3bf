// EtcdClient speaks to one etcd server through its v3 JSON gateway over
// HTTP (libcurl): keys and values, transactions, leases and watches, the
// few calls membership needs (ps/coord/membership.h). The bodies are the
// messages of proto/etcd.proto in protobuf's JSON mapping.
//
// Errors: UNAVAILABLE naming the endpoint when etcd cannot be reached (or
// answers 5xx), DEADLINE_EXCEEDED past the call's timeout, and etcd's own
// code and message when it refuses a request (e.g. NOT_FOUND for a lease
// that has ended).
//
// Thread-safety: all methods are safe to call concurrently; each call uses
// its own connection.
#ifndef SHARDPS_PS_COORD_ETCD_CLIENT_H_
#define SHARDPS_PS_COORD_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/etcd.pb.h"

namespace ps {

struct EtcdOptions {
  // "http://host:port" of an etcd client URL.
  std::string endpoint;
  // Every unary call's limit, connecting included.
  absl::Duration timeout = absl::Seconds(5);
};

class EtcdClient {
 public:
  // INVALID_ARGUMENT unless the endpoint is http://host:port.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(
      EtcdOptions options);

  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  const std::string& endpoint() const { return options_.endpoint; }

  // The key, if it exists (an empty response otherwise).
  absl::StatusOr<shardps::etcd::RangeResponse> Get(absl::string_view key) const;
  // Every key starting with `prefix`, in key order.
  absl::StatusOr<shardps::etcd::RangeResponse> GetPrefix(
      absl::string_view prefix) const;
  // Sets the key, tied to `lease` when non-zero; the revision it made.
  absl::StatusOr<int64_t> Put(absl::string_view key, absl::string_view value,
                              int64_t lease = 0) const;
  absl::Status Delete(absl::string_view key) const;
  absl::StatusOr<shardps::etcd::TxnResponse> Txn(
      const shardps::etcd::TxnRequest& txn) const;
  // Creates the key (with `lease`) only if it does not exist: true when
  // this call created it. One transaction, so of several callers exactly
  // one wins.
  absl::StatusOr<bool> CreateIfAbsent(absl::string_view key,
                                      absl::string_view value,
                                      int64_t lease) const;

  // A lease of `ttl` (whole seconds, rounded up; etcd may lengthen it to
  // its minimum); its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) const;
  // Renews the lease; the TTL it has again. NOT_FOUND once it has ended.
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease) const;
  // Ends the lease now, deleting its keys.
  absl::Status RevokeLease(int64_t lease) const;

  // Watches every key starting with `prefix` from `start_revision` (0:
  // from now), calling `on_events` with each response (the first one says
  // the watch was created) until it returns false or `stop` becomes true;
  // then OK. An error when the connection fails or etcd cancels the watch
  // (e.g. a compacted start_revision).
  absl::Status Watch(
      absl::string_view prefix, int64_t start_revision,
      absl::FunctionRef<bool(const shardps::etcd::WatchResponse&)> on_events,
      const std::atomic<bool>& stop) const;

  // The end of the range of keys starting with `prefix` (etcd's
  // convention: the prefix with its last byte incremented).
  static std::string PrefixEnd(absl::string_view prefix);

 private:
  explicit EtcdClient(EtcdOptions options) : options_(std::move(options)) {}

  // POSTs `request` as JSON to the gateway's `path` and reads the answer
  // into *response.
  absl::Status Call(absl::string_view path,
                    const google::protobuf::Message& request,
                    google::protobuf::Message* response) const;

  const EtcdOptions options_;
};

}  // namespace ps

#endif  // SHARDPS_PS_COORD_ETCD_CLIENT_H_
