// Why a client cannot reach a server, in words a user acts on: gRPC reports
// a failed connection as UNAVAILABLE with the socket's or TLS library's
// text ("Connection refused", "WRONG_VERSION_NUMBER", ...), and a call that
// waits for the connection only as "Deadline Exceeded". ConnectCause turns
// the last failed attempt into the likely cause and what to check.
//
// Thread-safety: a pure function.
#ifndef SHARDPS_PS_CLIENT_CONNECT_CAUSE_H_
#define SHARDPS_PS_CLIENT_CONNECT_CAUSE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ps {

// The cause of `attempt` (a failed call to `address`, made without waiting
// for the connection), for a client that uses TLS when `client_tls`; the
// attempt's own message, after the cause, when it names none it knows.
std::string ConnectCause(const absl::Status& attempt, absl::string_view address,
                         bool client_tls);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_CONNECT_CAUSE_H_
