// NginxServer: Debian's nginx serving a directory over HTTP on a free
// loopback port, for tests of the loader's http:// reads. Stopped (and its
// process reaped) on destruction.
#ifndef SHARDPS_TESTS_UTIL_NGINX_SERVER_H_
#define SHARDPS_TESTS_UTIL_NGINX_SERVER_H_

#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "util/files.h"
#include "util/processes.h"

namespace testutil {

constexpr char kNginx[] = "/usr/sbin/nginx";

inline bool HaveNginx() { return ::access(kNginx, X_OK) == 0; }

class NginxServer {
 public:
  // Serves `root`; check started() before use.
  explicit NginxServer(const std::string& root) : port_(FreeLoopbackPort()) {
    const std::string prefix = work_.path();
    // As root the workers would drop to an unprivileged user that cannot
    // read the test's private directories.
    const std::string user = ::geteuid() == 0 ? "user root;\n" : "";
    WriteFile(
        prefix + "/nginx.conf",
        absl::StrCat(user, "daemon off;\nworker_processes 1;\npid ", prefix,
                     "/nginx.pid;\nerror_log ", prefix,
                     "/error.log;\nevents { worker_connections 64; }\n"
                     "http {\n  access_log off;\n  client_body_temp_path ",
                     prefix, ";\n  proxy_temp_path ", prefix,
                     ";\n  fastcgi_temp_path ", prefix, ";\n  uwsgi_temp_path ",
                     prefix, ";\n  scgi_temp_path ", prefix,
                     ";\n  server { listen 127.0.0.1:", port_, "; root ", root,
                     "; }\n}\n"));
    nginx_ = StartProcess("nginx",
                          {kNginx, "-p", prefix, "-c", prefix + "/nginx.conf",
                           "-e", prefix + "/error.log"},
                          prefix + "/nginx.out");
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (nginx_ != nullptr && absl::Now() < deadline && !Connects(port_)) {
      if (nginx_->Poll().has_value()) break;   // it exited
      absl::SleepFor(absl::Milliseconds(20));  // polling interval
    }
    started_ = nginx_ != nullptr && nginx_->running() && Connects(port_);
  }
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  bool started() const { return started_; }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  std::string error_log() const {
    return ReadFile(work_.path() + "/error.log");
  }

 private:
  ScopedTempDir work_{"shardps-nginx"};
  const int port_;
  std::unique_ptr<ps::ChildProcess> nginx_;  // stopped on destruction
  bool started_ = false;
};

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_NGINX_SERVER_H_
