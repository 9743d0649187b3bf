#include "worker/launch/run_record.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "ps/base/atomic_file.h"
#include "ps/base/json_file.h"
#include "ps/obs/trace.h"

namespace worker {

CpuTimes ReadCpuTimes() {
  std::ifstream in("/proc/stat");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
  CpuTimes t;
  for (size_t i = 1; i < f.size() && i <= 8; ++i) {
    const double v = std::strtod(f[i].c_str(), nullptr);
    t.total += v;
    if (i != 4 && i != 5) t.busy += v;  // idle and iowait are not busy
  }
  return t;
}

std::vector<StepEnd> StepEnds(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  std::vector<StepEnd> steps;
  while (std::getline(in, line)) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    double end = 0;
    int batch = 0;
    if (f.size() >= 9 && absl::SimpleAtod(f[8], &end) &&
        absl::SimpleAtoi(f[2], &batch)) {
      steps.emplace_back(end, batch);
    }
  }
  return steps;
}

int64_t StepsLogged(const std::string& path) {
  std::ifstream in(path);
  if (!in) return 0;
  const int64_t lines = std::count(std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>(), '\n');
  return std::max<int64_t>(0, lines - 1);
}

double SteadySamplesPerSecond(
    const std::vector<std::vector<StepEnd>>& workers) {
  double start = 0, end = 1e300;
  for (const auto& w : workers) {
    if (w.empty()) return 0;
    start = std::max(start, w.front().first);
    end = std::min(end, w.back().first);
  }
  if (end <= start) return 0;
  double samples = 0;
  for (const auto& w : workers) {
    for (const auto& [t, n] : w) {
      if (t > start && t <= end) samples += n;
    }
  }
  return samples / (end - start);
}

namespace {

// Adds one worker's summary to the run's: the run's init and train times
// are the slowest worker's.
void AddWorker(const shardps::WorkerSummary& w, shardps::RunSummary* s) {
  s->set_init_seconds(std::max(s->init_seconds(), w.init_seconds()));
  s->set_train_seconds(std::max(s->train_seconds(), w.train_seconds()));
  s->set_emulated_compute_ms(w.emulated_compute_ms());
  if (w.rank() == 0) s->set_test_accuracy(w.test_accuracy());
  s->set_optimizer(w.optimizer());
  s->set_consistency(w.consistency());
  s->set_compression(w.compression());
  s->set_lr_schedule(w.lr_schedule());
  *s->add_per_worker() = w;
}

}  // namespace

void AddWorkerSummaries(const std::string& run_dir, int workers,
                        shardps::RunSummary* summary) {
  uint64_t samples = 0, records = 0;
  double bytes_per_step = 0;
  int reported = 0;
  std::vector<std::vector<StepEnd>> steps;
  for (int r = 0; r < workers; ++r) {
    steps.push_back(StepEnds(absl::StrCat(run_dir, "/metrics-", r, ".csv")));
    shardps::WorkerSummary w;
    if (!ps::ReadJsonFile(absl::StrCat(run_dir, "/summary-", r, ".json"), &w)
             .ok()) {
      continue;  // a worker that failed wrote none
    }
    AddWorker(w, summary);
    if (w.steps() > 0) {
      bytes_per_step += (w.pull_bytes() + w.push_bytes()) / w.steps();
      ++reported;
    }
    samples += w.samples();
    records += w.partition_records();
  }
  if (reported > 0) summary->set_bytes_per_step(bytes_per_step / reported);
  if (summary->train_seconds() > 0) {
    summary->set_overall_samples_per_second(samples / summary->train_seconds());
  }
  const double steady = SteadySamplesPerSecond(steps);
  summary->set_samples_per_second(
      steady > 0 ? steady : summary->overall_samples_per_second());
  if (summary->samples_per_second() > 0) {
    summary->set_epoch_seconds(records / summary->samples_per_second());
  }
}

absl::Status WriteMetricsTargets(const std::string& path,
                                 const std::string& job, int base_port,
                                 const std::vector<HostSlot>& servers,
                                 const std::vector<HostSlot>& workers) {
  google::protobuf::ListValue groups;
  auto add = [&](const std::string& address, int port, const char* role,
                 const std::string& process) {
    auto& group =
        *groups.add_values()->mutable_struct_value()->mutable_fields();
    group["targets"].mutable_list_value()->add_values()->set_string_value(
        absl::StrCat(address, ":", port));
    auto& labels = *group["labels"].mutable_struct_value()->mutable_fields();
    labels["role"].set_string_value(role);
    labels["process"].set_string_value(process);
    labels["shardps_job"].set_string_value(job);
  };
  const int s = static_cast<int>(servers.size());
  for (int i = 0; i < s; ++i) {
    add(servers[i].address, base_port + i, "server",
        absl::StrCat("server-", i));
  }
  for (size_t r = 0; r < workers.size(); ++r) {
    add(workers[r].address, base_port + s + static_cast<int>(r), "worker",
        absl::StrCat("worker-", r));
  }
  // Not ps::ToJson: printing unset fields would add "values" keys, which
  // Prometheus refuses.
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(groups, &json).ok()) {
    return absl::InternalError("cannot print the Prometheus targets");
  }
  return ps::WriteFileAtomically(path, json + "\n");
}

std::vector<std::string> MergeRunTraces(
    const std::string& run_dir, const std::vector<std::string>& processes) {
  std::vector<std::string> problems;
  std::vector<std::string> inputs;
  for (const std::string& process : processes) {
    const std::string path = absl::StrCat(run_dir, "/", process, ".trace.json");
    if (::access(path.c_str(), R_OK) == 0) {
      inputs.push_back(path);
    } else {
      problems.push_back(absl::StrCat(process, " left no trace (", path, ")"));
    }
  }
  if (absl::Status s = ps::MergeTraces(inputs, run_dir + "/trace.json");
      !s.ok()) {
    problems.push_back(absl::StrCat("merging traces: ", s.ToString()));
  }
  return problems;
}

}  // namespace worker
