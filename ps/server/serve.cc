#include "ps/server/serve.h"

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/stubs/logging.h"
#include "ps/base/log.h"
#include "ps/base/port_file.h"
#include "ps/obs/trace.h"

namespace ps {
namespace {

// protobuf logs an ERROR for each string field that is not UTF-8 in a
// message it parses. A server parses what any client sends and answers such
// a request INVALID_ARGUMENT itself, so these lines would only let clients
// fill its log; everything else protobuf says goes to stderr as before.
void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  if (absl::StrContains(message, "contains invalid UTF-8 data when parsing")) {
    return;
  }
  static constexpr const char* kLevels[] = {"INFO", "WARNING", "ERROR",
                                            "FATAL"};
  const int index = static_cast<int>(level);
  absl::FPrintF(stderr, "[libprotobuf %s %s:%d] %s\n",
                index >= 0 && index < 4 ? kLevels[index] : "?", file, line,
                message);
}

}  // namespace

absl::Status Serve(ServeOptions options, const StopSignals& stop) {
  // Process-wide, so set once here, before any thread parses a message.
  google::protobuf::SetLogHandler(&ProtobufLog);
  absl::StatusOr<std::unique_ptr<Tracer>> tracer =
      OpenTraceFlag(options.trace_path, options.trace_name);
  if (!tracer.ok()) return tracer.status();
  options.server.tracer = tracer->get();
  if (options.server.drop_reply_fraction > 0) {
    Logf(options.server.log,
         "FAULT INJECTION: answering %.0f%% of pulls and pushes UNAVAILABLE "
         "after carrying them out",
         options.server.drop_reply_fraction * 100);
  }
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Start(options.server);
  if (!server.ok()) return server.status();
  if (!options.port_file.empty()) {
    if (absl::Status s = WritePortFile(options.port_file, (*server)->port());
        !s.ok()) {
      return s;
    }
  }
  Logf(options.server.log, "job %s listening on %s", options.server.job,
       (*server)->address());
  if ((*server)->metrics_port() >= 0) {
    Logf(options.server.log, "metrics at http://%s:%d/metrics",
         options.server.host, (*server)->metrics_port());
  }
  const int signal = stop.Wait();
  Logf(options.server.log, "%s received, shutting down", SignalName(signal));
  if (absl::Status s = (*server)->Shutdown(options.shutdown_grace); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("last checkpoint failed: ", s.message()));
  }
  Log(options.server.log, "stopped");
  return absl::OkStatus();
}

}  // namespace ps
