#include "experiments/sim/worker_actor.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sim {
namespace {

namespace s4u = simgrid::s4u;

// `seconds` of one core's work on each of `threads` cores.
s4u::ExecPtr StartExec(s4u::Host* cpu, double seconds, int threads = 1) {
  s4u::ExecPtr exec = s4u::Exec::init()
                          ->set_flops_amount(seconds * kFlopsPerSecond)
                          ->set_thread_count(threads)
                          ->set_host(cpu);
  exec->start();
  return exec;
}

// The parallel loader's ring: a reader fills it batch by batch, ahead of
// the steps by at most its capacity.
class BatchRing {
 public:
  explicit BatchRing(int capacity)
      : capacity_(capacity),
        mu_(s4u::Mutex::create()),
        cv_(s4u::ConditionVariable::create()) {}

  void Put() {
    std::unique_lock<s4u::Mutex> lock(*mu_);
    cv_->wait(lock, [this] { return ready_ < capacity_; });
    ++ready_;
    cv_->notify_all();
  }
  void Take() {
    std::unique_lock<s4u::Mutex> lock(*mu_);
    cv_->wait(lock, [this] { return ready_ > 0; });
    --ready_;
    cv_->notify_all();
  }

 private:
  const int capacity_;
  int ready_ = 0;
  s4u::MutexPtr mu_;
  s4u::ConditionVariablePtr cv_;
};

class Worker : public std::enable_shared_from_this<Worker> {
 public:
  Worker(int w, const JobSpec& job, const Calibration& calibration,
         const Platform& platform, JobState* state)
      : w_(w),
        job_(job),
        cal_(calibration),
        p_(platform),
        state_(state),
        ring_(std::max(job.prefetch_batches, 1)),
        random_(job.seed * 1000003 + w),
        layer_mu_(s4u::Mutex::create()),
        layer_cv_(s4u::ConditionVariable::create()),
        exchanged_(job.layers.size(), 0) {
    for (int l = 0; l < static_cast<int>(job.layers.size()); ++l) {
      layer_events_.push_back({job.layers[l].forward_at, true, l});
      layer_events_.push_back({job.layers[l].gradient_at, false, l});
    }
    std::stable_sort(
        layer_events_.begin(), layer_events_.end(),
        [](const LayerEvent& a, const LayerEvent& b) { return a.at < b.at; });
  }

  void Run() {
    const double process_start = s4u::Engine::get_clock();
    s4u::this_actor::sleep_for(cal_.startup_wait);
    StartExec(p_.worker_cpus[w_],
              cal_.startup_cpu + cal_.startup_cpu_per_server * job_.servers,
              static_cast<int>(cal_.startup_threads))
        ->wait();
    if (job_.loader == Loader::kSequential) {
      const double block_bytes =
          std::max(job_.read_block_bytes, job_.dataset_bytes / 64);
      for (double left = job_.dataset_bytes; left > 0; left -= block_bytes) {
        const double block = std::min(left, block_bytes);
        s4u::Comm::sendto(p_.storage, p_.workers[w_],
                          static_cast<uint64_t>(block));
        StartExec(p_.worker_cpus[w_], block * cal_.read_cpu_per_byte)->wait();
      }
    } else {
      s4u::Actor::create(absl::StrCat("reader-", w_), p_.workers[w_],
                         [self = shared_from_this()] { self->Read(); });
    }
    for (int step = 0; step < job_.steps; ++step) {
      if (job_.loader == Loader::kParallel) ring_.Take();
      if (step == 0) {
        state_->inits[w_] = s4u::Engine::get_clock() - process_start;
        std::uniform_real_distribution<double> phase(0,
                                                     job_.phase_spread_seconds);
        s4u::this_actor::sleep_for(phase(random_));
      }
      if (job_.consistency == Consistency::kSync && step > 0) {
        state_->AwaitPushes(step - 1);
      }
      if (job_.overlap == Overlap::kLayer) {
        if (step == 0) {  // every layer's first parameters, at once
          const double pull_start = s4u::Engine::get_clock();
          Transfer(/*pull=*/true, job_.param_bytes);
          state_->pull_seconds += s4u::Engine::get_clock() - pull_start;
        }
        LayerStep(step);
        state_->step_ends[w_].push_back(s4u::Engine::get_clock());
        continue;
      }
      const double pull_start = s4u::Engine::get_clock();
      Transfer(/*pull=*/true, job_.param_bytes);
      state_->pull_seconds += s4u::Engine::get_clock() - pull_start;
      s4u::this_actor::sleep_for(job_.compute_seconds);
      const double push_start = s4u::Engine::get_clock();
      Transfer(/*pull=*/false, job_.param_bytes);
      state_->push_seconds += s4u::Engine::get_clock() - push_start;
      if (job_.consistency == Consistency::kSync) state_->Pushed(step);
      state_->step_ends[w_].push_back(s4u::Engine::get_clock());
    }
  }

 private:
  // A step under --overlap=layer (worker/train/layer_exchange.h): compute
  // runs through the layers' events in time order; forward waits at a
  // layer whose exchange of the last step is still on its way (the wait
  // counts as pulling, as the real worker's does), and each gradient
  // starts its layer's exchange at once.
  void LayerStep(int step) {
    double at = 0;
    for (const LayerEvent& e : layer_events_) {
      s4u::this_actor::sleep_for((e.at - at) * job_.compute_seconds);
      at = e.at;
      if (e.forward) {
        const double wait_start = s4u::Engine::get_clock();
        std::unique_lock<s4u::Mutex> lock(*layer_mu_);
        layer_cv_->wait(lock, [&] { return exchanged_[e.layer] >= step; });
        state_->pull_seconds += s4u::Engine::get_clock() - wait_start;
      } else {
        s4u::Actor::create(
            absl::StrCat("exchange-", w_, "-", e.layer), p_.workers[w_],
            [self = shared_from_this(), l = e.layer] { self->Exchange(l); });
      }
    }
    s4u::this_actor::sleep_for((1 - at) * job_.compute_seconds);
  }

  // One layer's PushPull: its calls of up to chunk_bytes a shard, each
  // pushed after the one before it, each answered (the pull's stages) as
  // soon as it is applied, so answers flow back while later calls are
  // still pushed.
  void Exchange(int layer) {
    const double bytes = job_.layers[layer].bytes;
    const double rounds =
        std::max(1.0, std::ceil(bytes / (job_.chunk_bytes * job_.servers)));
    std::vector<s4u::ActorPtr> answers;
    for (int c = 0; c < rounds; ++c) {
      Transfer(/*pull=*/false, bytes / rounds);
      answers.push_back(s4u::Actor::create(
          absl::StrCat("answer-", w_, "-", layer, "-", c), p_.workers[w_],
          [self = shared_from_this(), part = bytes / rounds] {
            self->Transfer(/*pull=*/true, part);
          }));
    }
    for (const s4u::ActorPtr& answer : answers) answer->join();
    std::unique_lock<s4u::Mutex> lock(*layer_mu_);
    ++exchanged_[layer];
    layer_cv_->notify_all();
  }

  // The parallel loader: this worker's batches, one after another.
  void Read() {
    const auto batch_bytes =
        static_cast<uint64_t>(job_.batch * job_.sample_bytes);
    for (int step = 0; step < job_.steps; ++step) {
      s4u::Comm::sendto(p_.storage, p_.workers[w_], batch_bytes);
      ring_.Put();
    }
  }

  // Seconds a pull or push waits before its calls start: its fixed
  // delay, and for a pull the push bytes already queued on its servers'
  // links (one FIFO for requests and bulk data), at the busiest of them.
  double StartDelay(bool pull) {
    if (!pull) return cal_.push_delay;
    double queued = 0;
    if (cal_.queued_push_bytes > 0) {
      for (int s = 0; s < static_cast<int>(p_.servers.size()); ++s) {
        queued = std::max(queued,
                          state_->InboundSeconds(
                              s, cal_.queued_push_bytes * p_.servers_per_host,
                              p_.server_link_capacity));
      }
    }
    return cal_.pull_delay + queued;
  }

  // Each shard host's bytes of a transfer of `bytes` a host, now
  // starting; each host's link counts it as crossing until Transfer ends.
  // Real transfers of the same bytes vary once they share a link (TCP,
  // scheduling): a part that starts beside another on its server's link
  // takes the calibrated spread on its own (the transfer ends with the
  // slowest); one that starts alone does not.
  std::vector<double> CrossingBytes(bool pull, double bytes) {
    std::vector<double> out(p_.servers.size());
    for (int s = 0; s < static_cast<int>(out.size()); ++s) {
      const double jitter = state_->Crossing(s, pull) > 0 ? Jitter() : 1;
      out[s] =
          bytes * jitter / (pull ? cal_.pull_efficiency : cal_.push_efficiency);
      state_->Cross(s, pull, +1);
    }
    return out;
  }

  // One pull or push of `param_bytes` of parameters, spread evenly over the
  // shards: every shard's calls at once, each shard's through its stages
  // (pull: server CPU, bytes to the worker with the CPU they cost on their
  // way, client CPU; push the other way round).
  void Transfer(bool pull, double param_bytes) {
    const int shards = static_cast<int>(p_.servers.size());
    const int share = p_.servers_per_host;  // shards a host stands for
    const double shard_bytes =
        param_bytes / job_.servers * (pull ? job_.pull_ratio : job_.push_ratio);
    const double shard_calls =
        std::max(1.0, std::ceil(shard_bytes / job_.chunk_bytes));
    // A server's work for its shard (a host standing for `share` servers
    // runs it once on each of `share` threads); the client's for the
    // shards this call stands for, split over as many of the worker's
    // cores as there are such shards.
    const double server =
        shard_calls * cal_.call_cpu + shard_bytes * cal_.server_cpu_per_byte;
    const int client_threads = std::min(share, p_.worker_cores);
    const double client =
        share *
        (shard_calls * cal_.call_cpu + shard_bytes * cal_.client_cpu_per_byte) /
        client_threads;
    const double wire_half = shard_bytes * cal_.wire_cpu_per_byte / 2;
    s4u::this_actor::sleep_for(StartDelay(pull));
    const std::vector<double> bytes = CrossingBytes(pull, shard_bytes * share);
    // Beside each pending activity (wait_any takes `pending` as it is):
    // its shard, and for a push's bytes the comm to unregister.
    struct Owner {
      int shard;
      s4u::CommPtr push = nullptr;
    };
    std::vector<s4u::ActivityPtr> pending;
    std::vector<Owner> owners;
    auto add = [&](s4u::ActivityPtr activity, Owner owner) {
      pending.push_back(std::move(activity));
      owners.push_back(std::move(owner));
    };
    std::vector<int> stage(shards, 0), left(shards, 0);
    auto on_server = [&](int s, double seconds) {
      add(StartExec(p_.server_cpus[s], seconds, share), {s});
    };
    auto on_client = [&](int s, double seconds) {
      add(StartExec(p_.worker_cpus[w_], seconds, client_threads), {s});
    };
    auto start = [&](int s) {
      const size_t before = pending.size();
      if (stage[s] == 1) {
        const auto n = static_cast<uint64_t>(bytes[s]);
        if (pull) {
          add(s4u::Comm::sendto_async(p_.servers[s], p_.workers[w_], n), {s});
        } else {
          s4u::CommPtr push =
              s4u::Comm::sendto_async(p_.workers[w_], p_.servers[s], n);
          state_->AddInbound(s, push);
          add(push, {s, push});
        }
        if (wire_half > 0) {
          on_server(s, wire_half);
          on_client(s, share * wire_half / client_threads);
        }
      } else if ((stage[s] == 0) == pull) {
        on_server(s, server);
      } else {
        on_client(s, client);
      }
      left[s] = static_cast<int>(pending.size() - before);
    };
    for (int s = 0; s < shards; ++s) start(s);
    while (!pending.empty()) {
      const ssize_t i = s4u::Activity::wait_any(pending);
      const int s = owners[i].shard;
      if (owners[i].push) state_->RemoveInbound(s, owners[i].push);
      pending.erase(pending.begin() + i);
      owners.erase(owners.begin() + i);
      if (--left[s] == 0 && ++stage[s] < 3) start(s);
    }
    for (int s = 0; s < shards; ++s) state_->Cross(s, pull, -1);
  }

  // A factor of mean 1 and the calibrated coefficient of variation,
  // within [0.5, 1.5].
  double Jitter() {
    if (cal_.transfer_cv <= 0) return 1;
    std::normal_distribution<double> normal(1, cal_.transfer_cv);
    return std::clamp(normal(random_), 0.5, 1.5);
  }

  const int w_;
  const JobSpec& job_;
  const Calibration& cal_;
  const Platform& p_;
  JobState* const state_;
  BatchRing ring_;
  std::mt19937_64 random_;
  // Under --overlap=layer: a step's layer events in time order (the same
  // every step), and the exchanges each layer finished (step k's forward
  // needs k of them).
  struct LayerEvent {
    double at;  // fraction of the step's compute
    bool forward;
    int layer;
  };
  std::vector<LayerEvent> layer_events_;
  s4u::MutexPtr layer_mu_;
  s4u::ConditionVariablePtr layer_cv_;
  std::vector<int> exchanged_;
};

}  // namespace

JobState::JobState(int workers, int server_hosts)
    : inits(workers, 0),
      step_ends(workers),
      workers_(workers),
      mu_(s4u::Mutex::create()),
      cv_(s4u::ConditionVariable::create()),
      inbound_(server_hosts),
      crossing_{std::vector<int>(server_hosts, 0),
                std::vector<int>(server_hosts, 0)} {}

int JobState::Crossing(int s, bool pull) const { return crossing_[pull][s]; }

void JobState::Cross(int s, bool pull, int delta) {
  crossing_[pull][s] += delta;
}

double JobState::InboundSeconds(int s, double queued, double capacity) const {
  double bytes = 0;
  for (const s4u::CommPtr& push : inbound_[s]) {
    bytes += std::min(push->get_remaining(), queued);
  }
  return bytes / capacity;
}

void JobState::AddInbound(int s, s4u::CommPtr push) {
  inbound_[s].push_back(std::move(push));
}

void JobState::RemoveInbound(int s, const s4u::CommPtr& push) {
  auto& pushes = inbound_[s];
  pushes.erase(std::find(pushes.begin(), pushes.end(), push));
}

void JobState::Pushed(int step) {
  std::unique_lock<s4u::Mutex> lock(*mu_);
  if (static_cast<int>(pushed_.size()) <= step) pushed_.resize(step + 1, 0);
  if (++pushed_[step] == workers_) cv_->notify_all();
}

void JobState::AwaitPushes(int step) {
  std::unique_lock<s4u::Mutex> lock(*mu_);
  cv_->wait(lock, [&] {
    return static_cast<int>(pushed_.size()) > step && pushed_[step] == workers_;
  });
}

void StartWorker(int w, const JobSpec& job, const Calibration& calibration,
                 const Platform& platform, JobState* state) {
  auto worker = std::make_shared<Worker>(w, job, calibration, platform, state);
  s4u::Actor::create(absl::StrCat("worker-", w), platform.workers[w],
                     [worker] { worker->Run(); });
}

}  // namespace sim
