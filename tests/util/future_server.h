// Test helper: a server of a future shardps release on a loopback port. Its
// health service says SERVING and its Stats states wire protocol 99, build
// "shardps 9.9.9"; nothing else is served.
#ifndef SHARDPS_TESTS_UTIL_FUTURE_SERVER_H_
#define SHARDPS_TESTS_UTIL_FUTURE_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "proto/shardps.grpc.pb.h"

namespace testutil {

class FutureServer final : public shardps::ParameterServer::Service {
 public:
  FutureServer() {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    EXPECT_NE(server_, nullptr);
  }
  ~FutureServer() override {
    if (server_ != nullptr) server_->Shutdown();
  }
  FutureServer(const FutureServer&) = delete;
  FutureServer& operator=(const FutureServer&) = delete;

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  grpc::Status Stats(grpc::ServerContext*, const shardps::StatsRequest*,
                     shardps::StatsResponse* response) override {
    response->set_protocol_version(99);
    response->set_build_version("shardps 9.9.9");
    return grpc::Status::OK;
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_FUTURE_SERVER_H_
