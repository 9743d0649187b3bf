#include "worker/launch/launcher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "ps/base/atomic_file.h"
#include "ps/base/child_process.h"
#include "ps/base/json_file.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "ps/obs/progress_line.h"
#include "ps/obs/trace.h"
#include "ps/wire/security.h"
#include "worker/launch/ssh_cluster.h"

namespace worker {
namespace {

// Busy and total jiffies of the whole machine (/proc/stat's first line).
struct CpuTimes {
  double busy = 0;
  double total = 0;
};

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

// (end time, samples) of every step in a worker's metrics file.
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

// Steps a worker has logged: lines of its metrics file after the header.
int64_t StepsLogged(const std::string& path) {
  std::ifstream in(path);
  if (!in) return 0;
  const int64_t lines = std::count(std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>(), '\n');
  return std::max<int64_t>(0, lines - 1);
}

// The command line that runs `command` at `slot`: the prefix plus the
// command, which a remote shell gets as one quoted string that first prints
// the shell's PID (the process keeps it through exec) for StopProcess.
std::vector<std::string> RemoteCommand(
    const HostSlot& slot, const std::vector<std::string>& command) {
  std::vector<std::string> argv = slot.command_prefix;
  if (!slot.remote) {
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  std::vector<std::string> quoted;
  for (const std::string& a : command) quoted.push_back(ShellQuote(a));
  argv.push_back(
      absl::StrCat("echo shardps-pid $$; exec ", absl::StrJoin(quoted, " ")));
  return argv;
}

// The PID a remote process printed first ("shardps-pid N"); 0 if none yet.
int RemotePid(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string word;
  int pid = 0;
  while (in >> word) {
    if (word == "shardps-pid") return (in >> pid) ? pid : 0;
  }
  return 0;
}

// Stops `p`: SIGTERM (for a remote process, sent on its host to the PID it
// printed, so that it can exit cleanly), then SIGKILL after `grace`.
absl::Status StopProcess(ps::ChildProcess& p, const HostSlot& slot,
                         absl::Duration grace) {
  if (!slot.remote || !p.running()) return p.Stop(grace);
  const int pid = RemotePid(p.log_path());
  if (pid > 0) {
    std::vector<std::string> kill = slot.stop_prefix;
    kill.push_back(absl::StrCat("kill -TERM ", pid));
    absl::StatusOr<std::unique_ptr<ps::ChildProcess>> k =
        ps::ChildProcess::Start(p.name() + " stop", kill,
                                p.log_path() + ".stop");
    if (k.ok()) (*k)->Wait(absl::Now() + grace).IgnoreError();
    if (absl::Status s = p.Wait(absl::Now() + grace);
        !absl::IsDeadlineExceeded(s)) {
      return s;
    }
  }
  // No PID, or it did not end: closing the connection hangs it up.
  return p.Stop(grace);
}

class Run {
 public:
  Run(const LaunchOptions& options, const StopWait& wait_for_stop)
      : o_(options), wait_for_stop_(wait_for_stop) {}

  shardps::RunSummary Execute() {
    const absl::Time start = absl::Now();
    const CpuTimes cpu0 = ReadCpuTimes();
    absl::Status status = StartAndMonitor();
    progress_.End();
    // Workers first, so none sees its servers vanish; then the servers.
    for (size_t r = 0; r < workers_.size(); ++r) {
      if (workers_[r]->running()) {
        StopProcess(*workers_[r], o_.worker_hosts[r], absl::Seconds(5))
            .IgnoreError();
      }
    }
    if (evaluator_ != nullptr && evaluator_->running()) {
      StopProcess(*evaluator_, o_.worker_hosts[0], absl::Seconds(5))
          .IgnoreError();
    }
    for (size_t i = 0; i < servers_.size(); ++i) {
      absl::Status stopped = StopProcess(servers_[i].process(),
                                         o_.server_hosts[i], absl::Seconds(10));
      if (status.ok() && !stopped.ok()) status = stopped;
    }
    const CpuTimes cpu1 = ReadCpuTimes();
    if (o_.trace) MergeProcessTraces();
    summary_.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start));
    const double total = cpu1.total - cpu0.total;
    summary_.set_cpu_utilisation(total > 0 ? (cpu1.busy - cpu0.busy) / total
                                           : 0);
    summary_.set_ok(status.ok());
    if (!status.ok()) summary_.set_error(std::string(status.message()));
    Record();
    return summary_;
  }

 private:
  absl::Status StartAndMonitor() {
    // First, so that Prometheus finds the processes as they start (it
    // applies new targets within about 5 s).
    if (o_.metrics_port > 0) {
      if (absl::Status s = WriteMetricsTargets(); !s.ok()) return s;
    }
    std::vector<std::string> addrs;
    for (int i = 0; i < o_.servers; ++i) {
      const HostSlot& slot = o_.server_hosts[i];
      std::vector<std::string> args = {absl::StrCat("--job=", o_.job)};
      if (!o_.auth_token_file.empty()) {
        args.push_back("--auth_token_file=" + o_.auth_token_file);
      }
      args.insert(args.end(), o_.server_args.begin(), o_.server_args.end());
      const std::string name = absl::StrCat("server-", i);
      if (o_.trace) {
        args.push_back(TraceFlag(name));
        args.push_back("--trace_name=" + name);
      }
      if (o_.metrics_port > 0) {
        args.push_back(absl::StrCat("--metrics_port=", o_.metrics_port + i));
      }
      if (slot.remote) {
        // No port file across hosts: a fixed port, and the health check
        // below says when it serves.
        std::vector<std::string> command = {o_.server_binary, "--host=0.0.0.0",
                                            absl::StrCat("--port=", slot.port)};
        command.insert(command.end(), args.begin(), args.end());
        absl::StatusOr<std::unique_ptr<ps::ChildProcess>> p =
            ps::ChildProcess::Start(
                name, RemoteCommand(slot, command),
                absl::StrCat(o_.run_dir, "/", name, ".log"));
        if (!p.ok()) return p.status();
        servers_.push_back({nullptr, *std::move(p)});
        addrs.push_back(absl::StrCat(slot.address, ":", slot.port));
        continue;
      }
      ps::ServerProcessOptions so;
      so.binary = o_.server_binary;
      so.run_dir = o_.run_dir;
      so.name = name;
      so.host = slot.address;
      so.command_prefix = slot.command_prefix;
      so.extra_args = args;
      so.start_timeout = o_.ready_timeout;
      absl::StatusOr<std::unique_ptr<ps::ServerProcess>> server =
          ps::ServerProcess::Spawn(so);
      if (!server.ok()) {
        return absl::Status(
            server.status().code(),
            absl::StrCat(name, " did not start: ", server.status().message()));
      }
      addrs.push_back((*server)->address());
      servers_.push_back({*std::move(server), nullptr});
    }
    // The launcher's own client: health checks now, statistics at the end.
    absl::StatusOr<std::unique_ptr<ps::Client>> client = ConnectTo(addrs);
    if (!client.ok()) return client.status();
    if (absl::Status s = WaitHealthy(**client); !s.ok()) return s;
    Progress("servers healthy");

    for (int r = 0; r < o_.workers; ++r) {
      // On the worker's host: its namespace (emulated) or over ssh.
      absl::StatusOr<std::unique_ptr<ps::ChildProcess>> w =
          ps::ChildProcess::Start(
              absl::StrCat("worker-", r),
              RemoteCommand(o_.worker_hosts[r],
                            WorkerArgv(r, addrs, absl::StrCat("worker-", r))),
              absl::StrCat(o_.run_dir, "/worker-", r, ".log"));
      if (!w.ok()) return w.status();
      workers_.push_back(*std::move(w));
    }
    if (absl::Status s = Monitor(); !s.ok()) return s;
    absl::Status evaluated = EvaluateFinalModel(addrs);
    RecordServerStats(**client, addrs);
    return evaluated;
  }

  absl::StatusOr<std::unique_ptr<ps::Client>> ConnectTo(
      const std::vector<std::string>& addrs) const {
    ps::ClientOptions co;
    co.server_addrs = addrs;
    co.job = o_.job;
    co.rpc_timeout = absl::Seconds(10);
    absl::StatusOr<std::string> token = ps::ReadTokenFile(o_.auth_token_file);
    if (!token.ok()) return token.status();
    co.auth_token = *token;
    return ps::Client::Connect(co);
  }

  // Each server's calls over the run (RunSummary.per_server), asked for
  // before the servers stop. Missing figures are reported, not fatal.
  void RecordServerStats(ps::Client& client,
                         const std::vector<std::string>& addrs) {
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client.Stats();
    if (!stats.ok()) {
      std::fprintf(stderr, "shardps-launch: no server statistics: %s\n",
                   stats.status().ToString().c_str());
      return;
    }
    for (size_t i = 0; i < stats->size(); ++i) {
      shardps::ServerSummary* server = summary_.add_per_server();
      server->set_index(static_cast<int>(i));
      server->set_address(addrs[i]);
      server->set_uptime_seconds((*stats)[i].uptime_seconds());
      *server->mutable_methods() = (*stats)[i].methods();
    }
  }

  // The command of worker `rank`; `process` names it in traces.
  std::vector<std::string> WorkerArgv(int rank,
                                      const std::vector<std::string>& addrs,
                                      const std::string& process) {
    std::vector<std::string> argv = {o_.worker_binary};
    argv.insert(argv.end(), o_.worker_args.begin(), o_.worker_args.end());
    argv.insert(
        argv.end(),
        {absl::StrCat("--server_addrs=", absl::StrJoin(addrs, ",")),
         absl::StrCat("--rank=", rank), absl::StrCat("--world=", o_.workers),
         absl::StrCat("--loader=", o_.loader),
         absl::StrCat("--run_dir=", o_.run_dir),
         absl::StrCat("--job=", o_.job)});
    if (!o_.data.empty()) argv.push_back(absl::StrCat("--data=", o_.data));
    if (!o_.auth_token_file.empty()) {
      argv.push_back("--auth_token_file=" + o_.auth_token_file);
    }
    if (o_.trace) {
      argv.push_back(TraceFlag(process));
      argv.push_back("--trace_name=" + process);
    }
    if (o_.metrics_port > 0 && process != "evaluate") {
      argv.push_back(
          absl::StrCat("--metrics_port=", o_.metrics_port + o_.servers + rank));
      argv.push_back("--metrics_host=" + o_.worker_hosts[rank].address);
    }
    return argv;
  }

  // RUN_DIR/prometheus-targets.json: every process's metrics endpoint, in
  // the format of Prometheus' file_sd_configs, labelled with its role and
  // name.
  absl::Status WriteMetricsTargets() {
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
      labels["shardps_job"].set_string_value(o_.job);
    };
    for (int i = 0; i < o_.servers; ++i) {
      const HostSlot& slot = o_.server_hosts[i];
      add(slot.address, o_.metrics_port + i, "server",
          absl::StrCat("server-", i));
    }
    for (int r = 0; r < o_.workers; ++r) {
      add(o_.worker_hosts[r].address, o_.metrics_port + o_.servers + r,
          "worker", absl::StrCat("worker-", r));
    }
    const std::string path = o_.run_dir + "/prometheus-targets.json";
    Progress(absl::StrCat("metrics: Prometheus targets in ", path));
    // Not ToJson: printing unset fields would add "values" keys, which
    // Prometheus refuses.
    std::string json;
    if (!google::protobuf::util::MessageToJsonString(groups, &json).ok()) {
      return absl::InternalError("cannot print the Prometheus targets");
    }
    return ps::WriteFileAtomically(path, json + "\n");
  }

  std::string TraceFlag(const std::string& process) const {
    return absl::StrCat("--trace=", o_.run_dir, "/", process, ".trace.json");
  }

  // Joins the processes' traces (written when they stopped) into
  // RUN_DIR/trace.json; a process that left none is reported and skipped.
  void MergeProcessTraces() {
    std::vector<std::string> inputs;
    auto add = [&](const std::string& process) {
      const std::string path =
          absl::StrCat(o_.run_dir, "/", process, ".trace.json");
      if (::access(path.c_str(), R_OK) == 0) {
        inputs.push_back(path);
      } else {
        std::fprintf(stderr, "shardps-launch: %s left no trace (%s)\n",
                     process.c_str(), path.c_str());
      }
    };
    for (int i = 0; i < o_.servers; ++i) add(absl::StrCat("server-", i));
    for (int r = 0; r < o_.workers; ++r) add(absl::StrCat("worker-", r));
    if (evaluator_ != nullptr) add("evaluate");
    if (absl::Status s = ps::MergeTraces(inputs, o_.run_dir + "/trace.json");
        !s.ok()) {
      std::fprintf(stderr, "shardps-launch: merging traces: %s\n",
                   s.ToString().c_str());
    }
  }

  // Rank 0's own accuracy is of the model when rank 0 finished; under async
  // others may push after that. This evaluates what the servers hold at the
  // end, from rank 0's host. A failed evaluation is reported, not fatal:
  // the training itself succeeded.
  absl::Status EvaluateFinalModel(const std::vector<std::string>& addrs) {
    summary_.set_final_test_accuracy(-1);
    std::vector<std::string> argv = WorkerArgv(0, addrs, "evaluate");
    argv.push_back("--evaluate_only");
    const std::string log = o_.run_dir + "/evaluate.log";
    absl::StatusOr<std::unique_ptr<ps::ChildProcess>> p =
        ps::ChildProcess::Start("evaluate",
                                RemoteCommand(o_.worker_hosts[0], argv), log);
    if (!p.ok()) return p.status();
    evaluator_ = *std::move(p);
    Progress("training done; evaluating the final model");
    std::optional<absl::Status> ended;
    while (!(ended = evaluator_->Poll()).has_value()) {
      if (wait_for_stop_(absl::Milliseconds(200))) {
        return absl::CancelledError("stopped by a signal; all processes ended");
      }
    }
    shardps::WorkerSummary evaluation;
    if (ended->ok() &&
        ps::ReadJsonFile(o_.run_dir + "/evaluation.json", &evaluation).ok()) {
      summary_.set_final_test_accuracy(evaluation.test_accuracy());
    } else {
      progress_.Print(
          absl::StrCat("shardps-launch: the final evaluation failed (",
                       ended->message(), "); see ", log));
    }
    return absl::OkStatus();
  }

  absl::Status WaitHealthy(ps::Client& client) {
    absl::Status s = client.WaitReady(o_.ready_timeout);
    if (!s.ok()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "servers not healthy within ", absl::FormatDuration(o_.ready_timeout),
          " (--ready_timeout_s): ", s.message()));
    }
    return absl::OkStatus();
  }

  absl::Status Monitor() {
    const absl::Time start = absl::Now();
    absl::Time next_progress = start;
    while (true) {
      if (wait_for_stop_(absl::Milliseconds(200))) {
        return absl::CancelledError("stopped by a signal; all processes ended");
      }
      int running = 0;
      for (auto& w : workers_) {
        std::optional<absl::Status> ended = w->Poll();
        if (!ended.has_value()) {
          ++running;
        } else if (!ended->ok()) {
          return *ended;
        }
      }
      for (auto& s : servers_) {
        if (std::optional<absl::Status> ended = s.process().Poll();
            ended.has_value()) {
          return absl::InternalError(
              absl::StrCat(s.process().name(), " ended during the run: ",
                           ended->ok() ? "exit code 0" : ended->message()));
        }
      }
      if (running == 0) return absl::OkStatus();
      const absl::Time now = absl::Now();
      if (now >= next_progress) {
        int64_t steps = 0;
        int training = 0;
        for (int r = 0; r < o_.workers; ++r) {
          const int64_t n =
              StepsLogged(absl::StrCat(o_.run_dir, "/metrics-", r, ".csv"));
          steps += n;
          if (n > 0 && workers_[r]->running()) ++training;
        }
        const double elapsed = absl::ToDoubleSeconds(now - start);
        Progress(absl::StrFormat(
            "%.0f s: %d servers; workers %d initialising, %d training, %d "
            "done; %d steps (%.0f/s)",
            elapsed, o_.servers, running - training, training,
            o_.workers - running, steps, steps / std::max(elapsed, 1e-9)));
        next_progress = now + (progress_.terminal() ? o_.progress_every
                                                    : 10 * o_.progress_every);
      }
    }
  }

  void Progress(const std::string& line) {
    progress_.Update("shardps-launch: " + line);
  }

  // Fills the summary from the processes and the workers' summaries.
  void Record() {
    summary_.set_cluster(o_.cluster);
    summary_.set_servers(o_.servers);
    summary_.set_workers(o_.workers);
    summary_.set_loader(o_.loader);
    summary_.set_cores(static_cast<int>(std::thread::hardware_concurrency()));
    for (const auto& [k, v] : o_.links) (*summary_.mutable_links())[k] = v;
    for (const std::string& a : o_.worker_args) summary_.add_worker_args(a);
    double cpu = 0;
    auto record = [&](ps::ChildProcess& p, const std::string& host) {
      shardps::ProcessRecord* r = summary_.add_processes();
      r->set_name(p.name());
      r->set_pid(p.last_pid());
      r->set_host(host);
      r->set_log(p.log_path());
      r->set_status(
          p.exit_status().ok() ? "ok" : std::string(p.exit_status().message()));
      r->set_cpu_seconds(p.cpu_seconds());
      cpu += p.cpu_seconds();
    };
    for (size_t i = 0; i < servers_.size(); ++i) {
      const HostSlot& slot = o_.server_hosts[i];
      record(servers_[i].process(),
             servers_[i].spawned != nullptr
                 ? servers_[i].spawned->address()
                 : absl::StrCat(slot.address, ":", slot.port));
    }
    for (size_t r = 0; r < workers_.size(); ++r) {
      record(*workers_[r], o_.worker_hosts[r].address);
    }
    if (evaluator_ != nullptr) record(*evaluator_, o_.worker_hosts[0].address);
    summary_.set_cpu_seconds(cpu);

    uint64_t samples = 0, records = 0;
    double bytes_per_step = 0;
    int reported = 0;
    for (int r = 0; r < o_.workers; ++r) {
      shardps::WorkerSummary w;
      if (!ps::ReadJsonFile(absl::StrCat(o_.run_dir, "/summary-", r, ".json"),
                            &w)
               .ok()) {
        continue;  // a worker that failed wrote none
      }
      summary_.set_init_seconds(
          std::max(summary_.init_seconds(), w.init_seconds()));
      summary_.set_train_seconds(
          std::max(summary_.train_seconds(), w.train_seconds()));
      summary_.set_emulated_compute_ms(w.emulated_compute_ms());
      if (w.rank() == 0) summary_.set_test_accuracy(w.test_accuracy());
      summary_.set_optimizer(w.optimizer());
      summary_.set_consistency(w.consistency());
      summary_.set_compression(w.compression());
      if (w.steps() > 0) {
        bytes_per_step += (w.pull_bytes() + w.push_bytes()) / w.steps();
        ++reported;
      }
      samples += w.samples();
      records += w.partition_records();
      *summary_.add_per_worker() = w;
    }
    if (reported > 0) summary_.set_bytes_per_step(bytes_per_step / reported);
    if (summary_.train_seconds() > 0) {
      summary_.set_overall_samples_per_second(samples /
                                              summary_.train_seconds());
    }
    std::vector<std::vector<StepEnd>> steps;
    for (int r = 0; r < o_.workers; ++r) {
      steps.push_back(
          StepEnds(absl::StrCat(o_.run_dir, "/metrics-", r, ".csv")));
    }
    const double steady = SteadySamplesPerSecond(steps);
    summary_.set_samples_per_second(
        steady > 0 ? steady : summary_.overall_samples_per_second());
    if (summary_.samples_per_second() > 0) {
      summary_.set_epoch_seconds(records / summary_.samples_per_second());
    }
  }

  const LaunchOptions& o_;
  const StopWait& wait_for_stop_;
  // One line rewritten in place on a terminal, a line per update otherwise.
  ps::ProgressLine progress_{stderr, isatty(STDERR_FILENO) != 0};
  // A server started here (with its port file) or through a remote shell.
  struct ServerRun {
    std::unique_ptr<ps::ServerProcess> spawned;
    std::unique_ptr<ps::ChildProcess> started;
    ps::ChildProcess& process() {
      return spawned != nullptr ? spawned->process() : *started;
    }
  };
  std::vector<ServerRun> servers_;
  std::unique_ptr<ps::ChildProcess> evaluator_;  // the final evaluation
  std::vector<std::unique_ptr<ps::ChildProcess>> workers_;
  shardps::RunSummary summary_;
};

}  // namespace

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

absl::StatusOr<shardps::RunSummary> Launch(const LaunchOptions& options,
                                           const StopWait& wait_for_stop) {
  if (options.servers < 1 || options.workers < 1) {
    return absl::InvalidArgumentError(
        "--servers and --workers must be at least 1");
  }
  if (options.server_hosts.size() != static_cast<size_t>(options.servers) ||
      options.worker_hosts.size() != static_cast<size_t>(options.workers)) {
    return absl::InvalidArgumentError("one host slot per server and worker");
  }
  if (options.metrics_port < 0 ||
      options.metrics_port + options.servers + options.workers > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port=", options.metrics_port, " leaves no room for ",
        options.servers + options.workers, " ports below 65536"));
  }
  if (options.loader != "sequential" && options.loader != "parallel") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loader=", options.loader, " is not sequential or parallel"));
  }
  if (::mkdir(options.run_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create --run_dir=", options.run_dir));
  }
  Run run(options, wait_for_stop);
  shardps::RunSummary summary = run.Execute();
  if (absl::Status s = ps::WriteJsonFile(
          summary, absl::StrCat(options.run_dir, "/summary.json"));
      !s.ok()) {
    return s;
  }
  return summary;
}

}  // namespace worker
