#include "ps/obs/trace.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "util/files.h"

namespace ps {
namespace {

// The file as JSON; fails the test if it is not valid JSON.
google::protobuf::Struct ParseTrace(const std::string& path) {
  google::protobuf::Struct trace;
  const auto status = google::protobuf::util::JsonStringToMessage(
      testutil::ReadFile(path), &trace);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return trace;
}

const google::protobuf::ListValue& Events(
    const google::protobuf::Struct& trace) {
  return trace.fields().at("traceEvents").list_value();
}

TEST(TraceTest, WritesChromeTraceEventsWithProcessAndThreadNames) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/trace.json";
  {
    absl::StatusOr<std::unique_ptr<Tracer>> tracer =
        Tracer::Open({path, "worker-0"});
    ASSERT_TRUE(tracer.ok()) << tracer.status();
    (*tracer)->NameThread("main");
    { TraceSpan span(tracer->get(), "pull", "worker"); }
    std::thread other([&] {
      (*tracer)->NameThread("rpc");
      TraceSpan span(tracer->get(), "push_rpc", "client", "shard", 3);
    });
    other.join();
    const absl::Time t0 = absl::FromUnixMicros(1'000'000);
    (*tracer)->Record("compute", "worker", t0, t0 + absl::Milliseconds(5));
  }  // the destructor writes the file
  const google::protobuf::Struct trace = ParseTrace(path);
  std::set<std::string> spans, thread_names;
  std::string process;
  for (const google::protobuf::Value& v : Events(trace).values()) {
    const auto& e = v.struct_value().fields();
    const std::string ph = e.at("ph").string_value();
    if (ph == "X") {
      spans.insert(e.at("name").string_value());
      EXPECT_GE(e.at("dur").number_value(), 0);
      if (e.at("name").string_value() == "compute") {
        EXPECT_EQ(e.at("ts").number_value(), 1'000'000);
        EXPECT_EQ(e.at("dur").number_value(), 5000);
      }
      if (e.at("name").string_value() == "push_rpc") {
        EXPECT_EQ(
            e.at("args").struct_value().fields().at("shard").number_value(), 3);
      }
    } else if (e.at("name").string_value() == "thread_name") {
      thread_names.insert(
          e.at("args").struct_value().fields().at("name").string_value());
    } else if (e.at("name").string_value() == "process_name") {
      process = e.at("args").struct_value().fields().at("name").string_value();
    }
  }
  EXPECT_EQ(spans, (std::set<std::string>{"pull", "push_rpc", "compute"}));
  EXPECT_EQ(thread_names, (std::set<std::string>{"main", "rpc"}));
  EXPECT_EQ(process, "worker-0");
}

TEST(TraceTest, TheRingKeepsTheNewestSpansAndCountsTheRest) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/trace.json";
  TraceOptions options{path, "server-0"};
  options.max_events = 10;
  auto tracer = *Tracer::Open(options);
  const absl::Time t0 = absl::Now();
  for (int i = 0; i < 25; ++i) {
    tracer->Record("handle_push", "server", t0, t0, "i", i);
  }
  EXPECT_EQ(tracer->dropped(), 15u);
  ASSERT_TRUE(tracer->Flush().ok());
  const google::protobuf::Struct trace = ParseTrace(path);
  std::vector<int> kept;
  for (const google::protobuf::Value& v : Events(trace).values()) {
    const auto& e = v.struct_value().fields();
    if (e.at("ph").string_value() != "X") continue;
    kept.push_back(static_cast<int>(
        e.at("args").struct_value().fields().at("i").number_value()));
  }
  EXPECT_EQ(kept, (std::vector<int>{15, 16, 17, 18, 19, 20, 21, 22, 23, 24}));
  EXPECT_EQ(trace.fields()
                .at("otherData")
                .struct_value()
                .fields()
                .at("dropped_events")
                .number_value(),
            15);
}

TEST(TraceTest, MergeGivesEachProcessItsOwnPid) {
  testutil::ScopedTempDir dir;
  std::vector<std::string> inputs;
  for (const char* name : {"server-0", "worker-0"}) {
    const std::string path = dir.path() + "/" + name + ".trace.json";
    auto tracer = *Tracer::Open({path, name});
    TraceSpan span(tracer.get(), name, "test");
    inputs.push_back(path);
  }
  const std::string merged = dir.path() + "/trace.json";
  absl::Status merged_status = MergeTraces(inputs, merged);
  ASSERT_TRUE(merged_status.ok()) << merged_status;
  std::set<double> pids;
  int spans = 0;
  const google::protobuf::Struct trace = ParseTrace(merged);
  for (const google::protobuf::Value& v : Events(trace).values()) {
    const auto& e = v.struct_value().fields();
    pids.insert(e.at("pid").number_value());
    spans += e.at("ph").string_value() == "X";
  }
  EXPECT_EQ(pids, (std::set<double>{1, 2}));
  EXPECT_EQ(spans, 2);
  // Missing or foreign files are named.
  absl::Status missing = MergeTraces({dir.path() + "/nope"}, merged);
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  testutil::WriteFile(dir.path() + "/other.json", "{\"x\": 1}\n");
  absl::Status foreign = MergeTraces({dir.path() + "/other.json"}, merged);
  EXPECT_TRUE(absl::IsInvalidArgument(foreign)) << foreign;
  EXPECT_NE(foreign.message().find("other.json"), std::string::npos);
}

TEST(TraceTest, AnUnwritablePathIsAnErrorNamingIt) {
  absl::StatusOr<std::unique_ptr<Tracer>> tracer =
      Tracer::Open({"/nonexistent-dir/trace.json", "w"});
  ASSERT_FALSE(tracer.ok());
  EXPECT_NE(tracer.status().message().find("/nonexistent-dir/trace.json"),
            std::string::npos)
      << tracer.status();
}

}  // namespace
}  // namespace ps
