#include "worker/launch/launcher.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "ps/base/child_process.h"
#include "ps/base/file_io.h"
#include "ps/base/json_file.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "ps/obs/progress_line.h"
#include "ps/obs/trace.h"
#include "worker/launch/cluster_check.h"
#include "worker/launch/remote_process.h"
#include "worker/launch/replica_set.h"
#include "worker/launch/run_record.h"
#include "worker/launch/worker_command.h"

namespace worker {
namespace {

// A server started here (with its port file) or through a remote shell.
struct ServerRun {
  std::unique_ptr<ps::ServerProcess> spawned;
  std::unique_ptr<ps::ChildProcess> started;
  ps::ChildProcess& process() {
    return spawned != nullptr ? spawned->process() : *started;
  }
};

class Run {
 public:
  Run(const LaunchOptions& options, const StopWait& wait_for_stop)
      : o_(options), wait_for_stop_(wait_for_stop) {}

  shardps::RunSummary Execute() {
    const absl::Time start = absl::Now();
    const CpuTimes cpu0 = ReadCpuTimes();
    absl::Status status = StartAndMonitor();
    progress_.End();
    if (absl::Status stopped = StopAll(); status.ok()) status = stopped;
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
      const std::string path = o_.run_dir + "/prometheus-targets.json";
      Progress(absl::StrCat("metrics: Prometheus targets in ", path));
      if (absl::Status s = WriteMetricsTargets(
              path, o_.job, o_.metrics_port, o_.server_hosts, o_.worker_hosts);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = StartServers(); !s.ok()) return s;
    // The launcher's own client: health checks now, statistics at the end.
    absl::StatusOr<std::unique_ptr<ps::Client>> client = Connect();
    if (!client.ok()) return client.status();
    if (o_.check_only) return CheckServers(**client);
    if (absl::Status s = WaitHealthy(**client); !s.ok()) return s;
    Progress("servers healthy");
    if (absl::Status s = StartWorkers(); !s.ok()) return s;
    if (absl::Status s = Monitor(); !s.ok()) return s;
    absl::Status evaluated = absl::OkStatus();
    if (o_.worker_script.empty()) evaluated = EvaluateFinalModel(**client);
    RecordServerStats(**client);
    return evaluated;
  }

  int ServerProcesses() const { return o_.servers * o_.replicas; }
  std::string ServerName(int i) const {
    return replicas_ != nullptr ? replicas_->Name(i)
                                : absl::StrCat("server-", i);
  }

  std::vector<std::string> ServerArgs(int i) const {
    const std::string name = ServerName(i);
    std::vector<std::string> args = {absl::StrCat("--job=", o_.job)};
    if (replicas_ != nullptr) {
      const std::vector<std::string> more = replicas_->ServerArgs(i);
      args.insert(args.end(), more.begin(), more.end());
    }
    if (!o_.auth_token_file.empty()) {
      args.push_back("--auth_token_file=" + o_.auth_token_file);
    }
    if (o_.server_hosts[i].emulated) args.push_back("--shared_memory=false");
    args.insert(args.end(), o_.server_args.begin(), o_.server_args.end());
    if (o_.trace) {
      args.push_back(TraceFlag(o_.run_dir, name));
      args.push_back("--trace_name=" + name);
    }
    if (o_.metrics_port > 0) {
      args.push_back(absl::StrCat("--metrics_port=", o_.metrics_port + i));
    }
    return args;
  }

  // Through a remote shell there is no port file across hosts: a fixed
  // port, and the health check says when it serves.
  absl::Status StartRemoteServer(int i, const std::vector<std::string>& args) {
    const HostSlot& slot = o_.server_hosts[i];
    const std::string name = absl::StrCat("server-", i);
    std::vector<std::string> command = {o_.server_binary, "--host=0.0.0.0",
                                        absl::StrCat("--port=", slot.port)};
    command.insert(command.end(), args.begin(), args.end());
    absl::StatusOr<std::unique_ptr<ps::ChildProcess>> p =
        ps::ChildProcess::Start(name, CommandAt(slot, command),
                                absl::StrCat(o_.run_dir, "/", name, ".log"));
    if (!p.ok()) return p.status();
    servers_.push_back({nullptr, *std::move(p)});
    addrs_.push_back(absl::StrCat(slot.address, ":", slot.port));
    return absl::OkStatus();
  }

  absl::Status StartServers() {
    if (o_.replicas > 1) {
      absl::StatusOr<std::unique_ptr<ReplicaSet>> set = ReplicaSet::Start(
          o_.run_dir, o_.control_address, o_.servers, o_.replicas);
      if (!set.ok()) return set.status();
      replicas_ = *std::move(set);
      Progress(absl::StrCat("etcd at ", replicas_->endpoint()));
    }
    for (int i = 0; i < ServerProcesses(); ++i) {
      if (i == o_.servers && replicas_ != nullptr) {
        // The first replicas are their shards' primaries before the
        // others join and copy from them.
        if (absl::Status s =
                replicas_->AwaitPrimaries(o_.job, o_.ready_timeout);
            !s.ok()) {
          return s;
        }
      }
      const HostSlot& slot = o_.server_hosts[i];
      if (slot.remote) {
        if (absl::Status s = StartRemoteServer(i, ServerArgs(i)); !s.ok()) {
          return s;
        }
        continue;
      }
      ps::ServerProcessOptions so;
      so.binary = o_.server_binary;
      so.run_dir = o_.run_dir;
      so.name = ServerName(i);
      so.host = slot.address;
      so.command_prefix = slot.command_prefix;
      so.extra_args = ServerArgs(i);
      so.start_timeout = o_.ready_timeout;
      absl::StatusOr<std::unique_ptr<ps::ServerProcess>> server =
          ps::ServerProcess::Spawn(so);
      if (!server.ok()) {
        return absl::Status(server.status().code(),
                            absl::StrCat(so.name, " did not start: ",
                                         server.status().message()));
      }
      addrs_.push_back((*server)->address());
      servers_.push_back({*std::move(server), nullptr});
    }
    return absl::OkStatus();
  }

  absl::Status StartWorkers() {
    for (int r = 0; r < o_.workers; ++r) {
      // On the worker's host: its namespace (emulated) or over ssh.
      const std::string name = absl::StrCat("worker-", r);
      absl::StatusOr<std::unique_ptr<ps::ChildProcess>> w =
          ps::ChildProcess::Start(
              name, CommandAt(o_.worker_hosts[r], WorkerArgv(r, name)),
              absl::StrCat(o_.run_dir, "/", name, ".log"));
      if (!w.ok()) return w.status();
      workers_.push_back(*std::move(w));
    }
    return absl::OkStatus();
  }

  // Workers first, so none sees its servers vanish; then the servers. The
  // first server that did not end cleanly, if any.
  absl::Status StopAll() {
    for (size_t r = 0; r < workers_.size(); ++r) {
      if (workers_[r]->running()) {
        StopAt(*workers_[r], o_.worker_hosts[r], absl::Seconds(5))
            .IgnoreError();
      }
    }
    if (evaluator_ != nullptr && evaluator_->running()) {
      StopAt(*evaluator_, o_.worker_hosts[0], absl::Seconds(5)).IgnoreError();
    }
    absl::Status status;
    for (size_t i = 0; i < servers_.size(); ++i) {
      absl::Status stopped =
          StopAt(servers_[i].process(), o_.server_hosts[i], absl::Seconds(10));
      if (status.ok()) status = stopped;
    }
    return status;
  }

  absl::StatusOr<std::unique_ptr<ps::Client>> Connect() const {
    ps::ClientOptions co;
    if (replicas_ != nullptr) {
      co.etcd = replicas_->endpoint();
      co.num_shards = o_.servers;
    } else {
      co.server_addrs = addrs_;
    }
    co.job = o_.job;
    co.rpc_timeout = absl::Seconds(10);
    co.tls = o_.tls;
    absl::StatusOr<std::string> token = ps::ReadTokenFile(o_.auth_token_file);
    if (!token.ok()) return token.status();
    co.auth_token = *token;
    return ps::Client::Connect(co);
  }

  // Each server's calls over the run (RunSummary.per_server), asked for
  // before the servers stop. Missing figures are reported, not fatal.
  void RecordServerStats(ps::Client& client) {
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client.Stats();
    if (!stats.ok()) {
      progress_.Print(absl::StrCat("shardps-launch: no server statistics: ",
                                   stats.status().ToString()));
      return;
    }
    // Where the statistics came from (with replicas, the shards' primaries).
    const std::vector<std::string> addresses = client.ServerAddresses();
    for (size_t i = 0; i < stats->size(); ++i) {
      shardps::ServerSummary* server = summary_.add_per_server();
      server->set_index(static_cast<int>(i));
      if (i < addresses.size()) server->set_address(addresses[i]);
      server->set_uptime_seconds((*stats)[i].uptime_seconds());
      *server->mutable_methods() = (*stats)[i].methods();
    }
  }

  // The command of worker `rank`; `process` names it in traces.
  std::vector<std::string> WorkerArgv(int rank,
                                      const std::string& process) const {
    return WorkerCommand(
        o_,
        {addrs_, replicas_ != nullptr ? replicas_->endpoint() : std::string()},
        rank, process);
  }

  // Joins the processes' traces (written when they stopped) into
  // RUN_DIR/trace.json; a process that left none is reported and skipped.
  void MergeProcessTraces() {
    std::vector<std::string> processes;
    for (int i = 0; i < ServerProcesses(); ++i) {
      processes.push_back(ServerName(i));
    }
    for (int r = 0; r < o_.workers; ++r) {
      processes.push_back(absl::StrCat("worker-", r));
    }
    if (evaluator_ != nullptr) processes.push_back("evaluate");
    for (const std::string& problem : MergeRunTraces(o_.run_dir, processes)) {
      progress_.Print(absl::StrCat("shardps-launch: ", problem));
    }
  }

  // Rank 0's own accuracy is of the model when rank 0 finished; under async
  // others may push after that. This evaluates what the servers hold at the
  // end, from rank 0's host. A failed evaluation is reported, not fatal:
  // the training itself succeeded.
  // `client`: the launcher's own, whose primaries the evaluation starts
  // with if etcd is away (training went on without it; a new process
  // cannot read the layout then).
  absl::Status EvaluateFinalModel(const ps::Client& client) {
    summary_.set_final_test_accuracy(-1);
    std::vector<std::string> argv = WorkerArgv(0, "evaluate");
    argv.push_back("--evaluate_only");
    if (replicas_ != nullptr) {
      argv.push_back("--server_addrs=" +
                     absl::StrJoin(client.ServerAddresses(), ","));
    }
    const std::string log = o_.run_dir + "/evaluate.log";
    absl::StatusOr<std::unique_ptr<ps::ChildProcess>> p =
        ps::ChildProcess::Start("evaluate", CommandAt(o_.worker_hosts[0], argv),
                                log);
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
      summary_.set_final_test_auc(evaluation.test_auc());
      summary_.set_generator_auc(evaluation.generator_auc());
    } else {
      progress_.Print(
          absl::StrCat("shardps-launch: the final evaluation failed (",
                       ended->message(), "); see ", log));
    }
    return absl::OkStatus();
  }

  // --check: the servers as a worker reaches them, each named with what is
  // wrong. Replicated shards are checked at their primaries, once elected.
  absl::Status CheckServers(ps::Client& client) {
    if (replicas_ != nullptr) {
      if (absl::Status s = WaitHealthy(client); !s.ok()) return s;
    }
    ClusterCheckOptions c;
    c.server_addrs = client.ServerAddresses();
    c.job = o_.job;
    c.tls = o_.tls;
    c.auth_token = client.options().auth_token;
    const absl::Time give_up = absl::Now() + o_.ready_timeout;
    absl::StatusOr<shardps::ClusterCheckReport> report = CheckClusterUntil(
        c, give_up, [&](const shardps::ClusterCheckReport& r) {
          Progress(absl::StrFormat("check: %d of %d servers ready, waiting; %s",
                                   r.servers_ready(), r.servers_size(),
                                   FirstProblem(r)));
        });
    if (!report.ok()) return report.status();
    const std::string path = o_.run_dir + "/check.json";
    if (absl::Status s = ps::WriteJsonFile(*report, path); !s.ok()) return s;
    progress_.Print(absl::StrCat("shardps-launch --check:\n",
                                 FormatCheckReport(*report), "report: ", path));
    if (!report->ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the cluster check found a problem: ", FirstProblem(*report)));
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

  // How many workers still run; an error when a worker failed or a server
  // ended.
  absl::StatusOr<int> PollProcesses() {
    int running = 0;
    for (auto& w : workers_) {
      std::optional<absl::Status> ended = w->Poll();
      if (!ended.has_value()) {
        ++running;
      } else if (!ended->ok()) {
        return *ended;
      }
    }
    for (ServerRun& s : servers_) {
      if (std::optional<absl::Status> ended = s.process().Poll();
          ended.has_value()) {
        return absl::InternalError(
            absl::StrCat(s.process().name(), " ended during the run: ",
                         ended->ok() ? "exit code 0" : ended->message()));
      }
    }
    return running;
  }

  absl::Status Monitor() {
    const absl::Time start = absl::Now();
    absl::Time next_progress = start;
    while (true) {
      if (wait_for_stop_(absl::Milliseconds(200))) {
        return absl::CancelledError("stopped by a signal; all processes ended");
      }
      absl::StatusOr<int> running = PollProcesses();
      if (!running.ok()) return running.status();
      if (*running == 0) return absl::OkStatus();
      const absl::Time now = absl::Now();
      if (now >= next_progress) {
        ShowProgress(now - start, *running);
        next_progress = now + (progress_.terminal() ? o_.progress_every
                                                    : 10 * o_.progress_every);
      }
    }
  }

  void ShowProgress(absl::Duration elapsed, int running) {
    int64_t steps = 0;
    int training = 0;
    for (int r = 0; r < o_.workers; ++r) {
      const int64_t n =
          StepsLogged(absl::StrCat(o_.run_dir, "/metrics-", r, ".csv"));
      steps += n;
      if (n > 0 && workers_[r]->running()) ++training;
    }
    const double seconds = absl::ToDoubleSeconds(elapsed);
    Progress(absl::StrFormat(
        "%.0f s: %d servers; workers %d initialising, %d training, %d "
        "done; %d steps (%.0f/s)",
        seconds, o_.servers, running - training, training, o_.workers - running,
        steps, steps / std::max(seconds, 1e-9)));
  }

  void Progress(const std::string& line) {
    progress_.Update("shardps-launch: " + line);
  }

  void RecordProcess(ps::ChildProcess& p, const std::string& host) {
    shardps::ProcessRecord* r = summary_.add_processes();
    r->set_name(p.name());
    r->set_pid(p.last_pid());
    r->set_host(host);
    r->set_log(p.log_path());
    r->set_status(
        p.exit_status().ok() ? "ok" : std::string(p.exit_status().message()));
    r->set_cpu_seconds(p.cpu_seconds());
    summary_.set_cpu_seconds(summary_.cpu_seconds() + p.cpu_seconds());
  }

  // Fills the summary from the processes and the workers' summaries.
  void Record() {
    summary_.set_cluster(o_.cluster);
    summary_.set_servers(o_.servers);
    summary_.set_workers(o_.workers);
    summary_.set_loader(o_.loader);
    summary_.set_overlap(o_.overlap);
    summary_.set_cores(static_cast<int>(std::thread::hardware_concurrency()));
    for (const auto& [k, v] : o_.links) (*summary_.mutable_links())[k] = v;
    for (const std::string& a : o_.worker_args) summary_.add_worker_args(a);
    for (size_t i = 0; i < servers_.size(); ++i) {
      const HostSlot& slot = o_.server_hosts[i];
      RecordProcess(servers_[i].process(),
                    servers_[i].spawned != nullptr
                        ? servers_[i].spawned->address()
                        : absl::StrCat(slot.address, ":", slot.port));
    }
    for (size_t r = 0; r < workers_.size(); ++r) {
      RecordProcess(*workers_[r], o_.worker_hosts[r].address);
    }
    if (evaluator_ != nullptr) {
      RecordProcess(*evaluator_, o_.worker_hosts[0].address);
    }
    AddWorkerSummaries(o_.run_dir, o_.workers, &summary_);
    // A Python worker's script evaluates the model itself, on rank 0.
    if (!o_.worker_script.empty()) {
      summary_.set_final_test_accuracy(summary_.test_accuracy());
    }
  }

  const LaunchOptions& o_;
  const StopWait& wait_for_stop_;
  // One line rewritten in place on a terminal, a line per update otherwise.
  ps::ProgressLine progress_{stderr, isatty(STDERR_FILENO) != 0};
  std::vector<std::string> addrs_;  // the server processes', in order
  // --replicas > 1: etcd; it outlives the servers (declared before them).
  std::unique_ptr<ReplicaSet> replicas_;
  std::vector<ServerRun> servers_;
  std::unique_ptr<ps::ChildProcess> evaluator_;  // the final evaluation
  std::vector<std::unique_ptr<ps::ChildProcess>> workers_;
  shardps::RunSummary summary_;
};

}  // namespace

absl::StatusOr<shardps::RunSummary> Launch(const LaunchOptions& options,
                                           const StopWait& wait_for_stop) {
  if (absl::Status s = CheckLaunchOptions(options); !s.ok()) return s;
  if (absl::Status s = ps::CreateDirectories(options.run_dir); !s.ok()) {
    return s;
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
